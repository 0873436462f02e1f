/*  consumer - one configured consumer: plugin, queue, workers, counters.
    See consumer.h.

    Each worker keeps its own counters and histograms, so every figure has
    exactly one writer; a snapshot sums the workers. A worker's counters
    change under its sequence lock, so each worker's (dequeued, completed,
    failed) triple is read consistent, and so is their sum.
*/
#include "consumer.h"

#include "atomics.h"
#include "crash.h"
#include "deadletter.h"
#include "emit.h"
#include "host.h"
#include "keyed.h"
#include "log.h"
#include "order_key.h"
#include "shard.h"
#include "pending.h"
#include "plugin.h"
#include "queue.h"
#include "retry.h"
#include "spool.h"
#include "spool_writer.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNTS_TRIES 64 /* readings of a consumer's counters before one must do */
/* How often a worker waiting for late completions looks at `abort`. */
#define PENDING_POLL_NS (200 * INT64_C (1000000))
/* Spilled messages whose completion waits for their spooled copy, at most
   (beyond, a spilled message counts as handled when written; one with an
   emit waiter always waits). */
#define DEFERRED_MAX 262144

typedef struct {
    /* Written by the worker's thread; the counters under `progress`. */
    alignas (FH_CACHE_LINE) atomic_uint progress; /* odd while changing */
    atomic_uint_fast64_t dequeued;
    atomic_uint_fast64_t completed;
    atomic_uint_fast64_t failed;
    atomic_uint_fast64_t retried;       /* consume calls after the first */
    atomic_uint_fast64_t dead_lettered;
    atomic_int_fast64_t consume_started_ns; /* 0 when not inside consume */
    atomic_uint_fast64_t consume_seq;       /* the message inside consume */
    fh_histogram_t queue_wait;
    fh_histogram_t processing;
    fh_handled_t handled;
    uint64_t rng;
    fh_ratelimit_t failure_log;
    fh_ratelimit_t retry_log; /* RETRY answers that gave a reason */
    char reason[256]; /* the plugin's set_reason with the last answer, or "" */
    /* Set at start; read by anyone. */
    alignas (FH_CACHE_LINE) fh_consumer_t *consumer;
    pthread_t thread;
    bool started;
    /* Owned by the thread that checks for stuck calls. */
    bool stuck;
} s_worker_t;

struct fh_consumer {
    /* Written by the enqueuer thread. */
    alignas (FH_CACHE_LINE) atomic_uint_fast64_t enqueued;
    atomic_uint_fast64_t dropped;
    atomic_uint_fast64_t backlog_max;
    bool warn_armed; /* the next crossing of warn_at is logged */
    atomic_size_t warn_at; /* a reload may change it */
    atomic_uint_fast64_t evicted;   /* drop-oldest: taken off the queue's head */

    alignas (FH_CACHE_LINE) atomic_bool abort; /* give up waiting: forced exit */
    atomic_uint done_workers;
    atomic_uint stuck_workers;              /* written by the stuck checker */
    char *name;
    atomic_size_t index;  /* in the configuration (a reload may move it) */
    atomic_bool retiring; /* closed by a reload: consume everything, spool too */
    fh_queue_t *queue;
    fh_plugin_t *plugin;
    const fanhub_consumer_desc_t *desc;
    void *state;
    bool initialized; /* init succeeded: fini is owed */
    fanhub_ctx_t ctx;
    fh_retry_config_t retry;
    int64_t consume_timeout_ns;
    fh_clock_ops_t clock;
    s_worker_t *workers;
    size_t worker_count;
    int overflow;               /* fh_overflow_t */

    /* With a state_dir: failed messages are kept here... */
    fh_deadletter_t *dead_letters;
    /* ...and the disk spool: read first at start, and where spill goes.
       While `spooling`, every new message goes to the spool (strict FIFO
       with the memory queue); the reader turns it off, under spill_lock,
       once the spool and the queue are both empty. */
    fh_spool_t *spool;
    /* The spool's appender: spilled messages are handed to it under
       spill_lock (enqueuer; the worker at shutdown) and written, with
       their fsyncs, on its own thread, so the bus thread never waits for
       the disk. Its hand-off counts as part of the spool: see
       s_spool_unread. */
    fh_spool_writer_t *spool_writer;
    atomic_bool spill_keeping;  /* the hand-off holds the memory queue kept
                                   at shutdown (not deferred) */
    pthread_mutex_t spill_lock;
    atomic_bool spooling;
    atomic_bool state_open;     /* spool and dead letters opened (release) */
    bool spill_at_shutdown;     /* overflow: spill */
    bool write_ahead;           /* queue.write_ahead: always spooling */
    bool wants_write_ahead;     /* ... once its spool is open */
    uint64_t spool_corrupt_at_open;

    /* Pool mode (workers > 1, or coalescing): a dispatcher thread moves
       messages from the queue into the per-key scheduler; the workers take
       them from there. Everything under pool_lock. */
    bool pool;
    fh_keyed_t *keyed;
    fh_order_key_t *order_key;  /* NULL: every message is its own key */
    fh_shard_t *shard;          /* shard:, read by the enqueuer; or NULL */
    pthread_mutex_t pool_lock;
    pthread_cond_t pool_work;   /* CLOCK_MONOTONIC: workers wait here */
    bool dispatcher_done;       /* the queue is closed and drained */
    bool pool_worked;           /* since the last idle call */
    pthread_t dispatcher;
    bool dispatcher_started;
    atomic_uint_fast64_t pool_started; /* messages taken for the first time */
    /* Written by the dispatcher. */
    atomic_uint_fast64_t coalesced;
    atomic_uint_fast64_t key_fallback; /* messages whose key could not be extracted */
    fh_handled_t dispatcher_handled;
    atomic_uint_fast64_t pool_handed; /* given to the scheduler (dispatcher) */

    /* Spilled messages of this run, in spool order, whose completion
       waits for their copy read back (under deferred_lock: the spiller
       appends, the reader takes). A ring. */
    pthread_mutex_t deferred_lock;
    struct s_deferred {
        uint64_t seq;
        fh_deferral_t *deferral;
    } *deferred;
    size_t deferred_head, deferred_count, deferred_cap;

    /* Messages the plugin answered FANHUB_PENDING (ABI 1.1). */
    fh_pending_t *pending;
    fh_ratelimit_t complete_log;
    bool pending_stuck; /* owned by the stuck checker */

    /* Written by the spool writer's thread (s_spill_written). */
    alignas (FH_CACHE_LINE) atomic_uint_fast64_t spilled; /* written to the spool */
    atomic_uint_fast64_t spill_dropped; /* accepted for the spool, then lost
                                           (not written: full, an error; or
                                           not read back: no memory); any
                                           thread, a locked add. Shown in
                                           dropped and evicted */
    fh_handled_t spill_handled;
    fh_ratelimit_t spill_log;
};

static void s_pending_wake (void *arg);
static void s_release_unhandled (fh_msg_t *msg, void *arg);
static fh_deferral_t *s_deferral_of (fh_consumer_t *self, uint64_t seq);
static void s_spill_describe (void *arg, void *item, fh_spool_entry_t *entry);
static void s_spill_written (void *arg, void *item, int rc, int error);
static void s_spill_wrote (void *arg);
static uint64_t s_spool_unread (fh_consumer_t *self);

int
fh_consumer_fits_plugin (const fh_consumer_config_t *config,
                         const fanhub_consumer_desc_t *desc, char *err, size_t errlen)
{
    size_t workers = config->workers ? config->workers : 1;
    if (workers > 1 && !(desc->flags & FANHUB_CONSUMER_THREAD_SAFE)) {
        snprintf (err, errlen,
                  "%s: consumer '%s': workers: %zu, but plugin '%s' does not declare "
                  "itself thread-safe (FANHUB_CONSUMER_THREAD_SAFE); use workers: 1",
                  config->where, config->name, workers, config->plugin);
        return -1;
    }
    return 0;
}

fh_consumer_t *
fh_consumer_new (const fh_consumer_config_t *config, size_t index, const char *plugin_dir,
                 char *err, size_t errlen)
{
    fh_consumer_t *self = aligned_alloc (FH_CACHE_LINE, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "%s: consumer '%s': out of memory", config->where,
                  config->name);
        return NULL;
    }
    memset (self, 0, sizeof *self);
    atomic_init (&self->warn_at, config->warn_at);
    self->warn_armed = true;
    atomic_init (&self->index, index);
    self->retry = config->retry;
    self->consume_timeout_ns = config->consume_timeout_ms * 1000000;
    self->clock = fh_clock_real;
    self->worker_count = config->workers ? config->workers : 1;
    self->overflow = config->overflow;
    self->wants_write_ahead = config->write_ahead && config->overflow == FH_OVERFLOW_SPILL;
    fh_handled_init (&self->spill_handled);
    pthread_mutex_init (&self->spill_lock, NULL);
    pthread_mutex_init (&self->deferred_lock, NULL);
    self->name = strdup (config->name);
    self->queue = fh_queue_new (config->queue_capacity);
    self->workers = aligned_alloc (FH_CACHE_LINE, self->worker_count * sizeof *self->workers);
    if (!self->name || !self->queue || !self->workers) {
        snprintf (err, errlen, "%s: consumer '%s': out of memory", config->where,
                  config->name);
        free (self->workers);
        self->workers = NULL;
        fh_consumer_destroy (&self);
        return NULL;
    }
    memset (self->workers, 0, self->worker_count * sizeof *self->workers);
    if (self->overflow == FH_OVERFLOW_DROP_OLDEST)
        fh_queue_set_evictable (self->queue);
    for (size_t i = 0; i < self->worker_count; i++) {
        s_worker_t *worker = &self->workers[i];
        worker->consumer = self;
        worker->rng = fh_retry_seed ((uint64_t) index * 1000 + i + 1);
        fh_histogram_init (&worker->queue_wait);
        fh_histogram_init (&worker->processing);
        fh_handled_init (&worker->handled);
    }
    self->ctx.consumer_name = self->name;
    self->ctx.consumer = self;
    self->pending = fh_pending_new (config->max_pending ? config->max_pending
                                                        : FH_DEFAULT_MAX_PENDING,
                                    s_pending_wake, self);
    if (!self->pending) {
        snprintf (err, errlen, "%s: consumer '%s': out of memory", config->where,
                  config->name);
        fh_consumer_destroy (&self);
        return NULL;
    }

    char why[1024];
    if (config->shard.count
        && !(self->shard = fh_shard_new (config->shard.index, config->shard.count,
                                         config->order_by, why, sizeof why))) {
        snprintf (err, errlen, "%s: consumer '%s': shard: %s", config->where, config->name, why);
        fh_consumer_destroy (&self);
        return NULL;
    }
    self->pool = self->worker_count > 1 || config->coalesce;
    if (self->pool) {
        fh_handled_init (&self->dispatcher_handled);
        pthread_condattr_t attr;
        pthread_condattr_init (&attr);
        pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
        pthread_cond_init (&self->pool_work, &attr);
        pthread_condattr_destroy (&attr);
        pthread_mutex_init (&self->pool_lock, NULL);
        self->keyed = fh_keyed_new (config->coalesce);
        if (config->order_by) {
            self->order_key = fh_order_key_parse (config->order_by, why, sizeof why);
            if (!self->order_key) {
                snprintf (err, errlen, "%s: consumer '%s': order_by: %s", config->where,
                          config->name, why);
                fh_consumer_destroy (&self);
                return NULL;
            }
        }
        if (!self->keyed) {
            snprintf (err, errlen, "%s: consumer '%s': out of memory", config->where,
                      config->name);
            fh_consumer_destroy (&self);
            return NULL;
        }
    }
    self->plugin = fh_plugin_load (config->plugin, plugin_dir, why, sizeof why);
    if (!self->plugin) {
        snprintf (err, errlen, "%s: consumer '%s': %s", config->where, config->name, why);
        fh_consumer_destroy (&self);
        return NULL;
    }
    self->desc = fh_plugin_desc (self->plugin);
    if (fh_consumer_fits_plugin (config, self->desc, err, errlen) != 0) {
        fh_consumer_destroy (&self);
        return NULL;
    }
    if (self->desc->init) {
        why[0] = '\0';
        if (self->desc->init (&fh_host, &self->ctx, config->options, &self->state, why,
                              sizeof why)
            != 0) {
            why[sizeof why - 1] = '\0';
            snprintf (err, errlen, "%s: consumer '%s': plugin '%s' refused its options: %s",
                      config->where, config->name, config->plugin,
                      why[0] ? why : "(init gave no reason)");
            fh_consumer_destroy (&self);
            return NULL;
        }
    }
    self->initialized = true;
    return self;
}

/* For messages that leave without being consumed at shutdown. */
static void
s_release_unhandled (fh_msg_t *msg, void *arg)
{
    (void) arg;
    fh_msg_release (msg, NULL);
}

void
fh_consumer_destroy (fh_consumer_t **self_p)
{
    fh_consumer_t *self = *self_p;
    if (!self)
        return;
    if (self->dispatcher_started)
        pthread_join (self->dispatcher, NULL);
    for (size_t i = 0; self->workers && i < self->worker_count; i++)
        if (self->workers[i].started)
            pthread_join (self->workers[i].thread, NULL);
    /* What it was handed is written before the spool closes (and before
       a reload's successor can open it: it waits for this destroy). */
    fh_spool_writer_destroy (&self->spool_writer);
    if (self->initialized && self->desc->fini)
        self->desc->fini (self->state);
    /* Completions that came too late (or never): not done, so a spooled
       one stays in the spool for the next run. */
    fh_pending_item_t late;
    while (self->pending && fh_pending_take_done (self->pending, &late))
        fh_msg_release (late.msg, NULL);
    fh_pending_destroy (&self->pending, s_release_unhandled, NULL);
    fh_shard_destroy (&self->shard);
    if (self->pool) {
        fh_keyed_destroy (&self->keyed, s_release_unhandled, NULL);
        fh_order_key_destroy (&self->order_key);
        pthread_mutex_destroy (&self->pool_lock);
        pthread_cond_destroy (&self->pool_work);
    }
    fh_queue_destroy (&self->queue);
    fh_spool_close_checked (&self->spool, NULL); /* a failure is logged and
                                                    makes the exit status */
    /* Spilled and never read back in this run: they wait in the spool;
       their waiters are let go. */
    for (size_t i = 0; i < self->deferred_count; i++) {
        fh_deferral_t *deferral =
            self->deferred[(self->deferred_head + i) % self->deferred_cap].deferral;
        if (deferral) /* NULL: its write failed, let go already */
            fh_deferral_release (deferral, NULL, 0);
    }
    free (self->deferred);
    pthread_mutex_destroy (&self->deferred_lock);
    fh_deadletter_close (&self->dead_letters);
    pthread_mutex_destroy (&self->spill_lock);
    fh_plugin_destroy (&self->plugin);
    free (self->workers);
    free (self->name);
    free (self);
    *self_p = NULL;
}

void
fh_consumer_set_clock (fh_consumer_t *self, const fh_clock_ops_t *clock)
{
    self->clock = *clock;
}

int
fh_consumer_open_state (fh_consumer_t *self, const fh_config_t *config, char *err,
                        size_t errlen)
{
    if (!config->state_dir)
        return 0;
    char dir[4096], why[1024];
    snprintf (dir, sizeof dir, "%s/%s/%s", config->state_dir, self->name, FH_DEADLETTER_SUBDIR);
    self->dead_letters = fh_deadletter_open (dir, self->name, true, why, sizeof why);
    if (!self->dead_letters) {
        snprintf (err, errlen, "consumer '%s': dead-letter store: %s", self->name, why);
        return -1;
    }
    snprintf (dir, sizeof dir, "%s/%s", config->state_dir, self->name);
    const fh_consumer_config_t *mine = &config->consumers[self->index];
    fh_spool_options_t options = {
        .segment_bytes = config->spool.segment_bytes,
        .max_bytes = mine->spool_max_bytes,
        .fsync = (fh_spool_fsync_t) config->spool.fsync,
        .fsync_interval_ms = config->spool.fsync_interval_ms,
    };
    self->spool = fh_spool_open (dir, &options, &self->spool_corrupt_at_open, why, sizeof why);
    if (!self->spool) {
        snprintf (err, errlen, "consumer '%s': spool: %s", self->name, why);
        return -1;
    }
    /* The hand-off covers a burst while one group commit is synced. */
    size_t handoff = fh_queue_capacity (self->queue);
    if (handoff < FH_SPOOL_WRITER_MIN_ITEMS)
        handoff = FH_SPOOL_WRITER_MIN_ITEMS;
    fh_spool_writer_ops_t ops = {s_spill_describe, s_spill_written, s_spill_wrote, self};
    self->spool_writer = fh_spool_writer_new (self->spool, handoff, FH_SPOOL_WRITER_MAX_BYTES,
                                              &ops, why, sizeof why);
    if (!self->spool_writer) {
        snprintf (err, errlen, "consumer '%s': spool: %s", self->name, why);
        fh_spool_close (&self->spool);
        return -1;
    }
    self->spill_at_shutdown = self->overflow == FH_OVERFLOW_SPILL;
    atomic_store_explicit (&self->state_open, true, memory_order_release);
    /* Write-ahead: every message is on disk before the consumer sees it,
       so a crash loses nothing the hub took. */
    self->write_ahead = mine->write_ahead && self->spill_at_shutdown;
    if (self->write_ahead)
        atomic_store (&self->spooling, true);
    uint64_t waiting = fh_spool_records (self->spool);
    if (waiting) {
        /* Left by the last run: it goes first, and new messages queue
           behind it. They count as accepted, so backlog includes them. */
        atomic_store (&self->spooling, true);
        atomic_store (&self->enqueued, waiting);
        fh_info ("consumer '%s': %llu messages waiting in its spool from the last run; "
                 "they go first", self->name, (unsigned long long) waiting);
    }
    if (self->spool_corrupt_at_open)
        fh_warning ("consumer '%s': spool: %llu damaged records or regions skipped",
                    self->name, (unsigned long long) self->spool_corrupt_at_open);
    return 0;
}

void
fh_consumer_tick (fh_consumer_t *self, int64_t now_ns)
{
    if (self->spool)
        fh_spool_tick (self->spool, now_ns);
}

void
fh_consumer_set_index (fh_consumer_t *self, size_t index)
{
    atomic_store (&self->index, index);
}

void
fh_consumer_retire (fh_consumer_t *self)
{
    atomic_store (&self->retiring, true);
    fh_queue_close (self->queue);
}

/* The sequence lock around a worker's counters. */
static inline void
s_progress_begin (s_worker_t *worker)
{
    unsigned v = atomic_load_explicit (&worker->progress, memory_order_relaxed);
    atomic_store_explicit (&worker->progress, v + 1, memory_order_relaxed);
    atomic_thread_fence (memory_order_release);
}

static inline void
s_progress_end (s_worker_t *worker)
{
    unsigned v = atomic_load_explicit (&worker->progress, memory_order_relaxed);
    atomic_store_explicit (&worker->progress, v + 1, memory_order_release);
}

static void
s_report_failure (s_worker_t *worker, const fh_msg_t *msg, const char *why)
{
    fanhub_bytes_t topic = fh_msg_frame (msg, 0);
    fh_log_limited (&worker->failure_log, FANHUB_LOG_WARNING,
                    "consumer '%s': message %llu (%.*s) failed: %s", worker->consumer->name,
                    (unsigned long long) msg->seq, (int) topic.size, (const char *) topic.data,
                    why);
}

/* One consume call, timed, visible to the stuck checker while it runs.
   `ticket` was reserved for it in the pending table: an answer of
   FANHUB_PENDING leaves it open there (and is not timed yet: its
   processing time is recorded when it completes); any other answer
   frees it. */
static fanhub_result_t
s_call_consume (s_worker_t *worker, fh_msg_t *msg, int64_t start, int64_t *end,
                fanhub_ticket_t ticket)
{
    fh_consumer_t *self = worker->consumer;
    atomic_store_explicit (&worker->consume_seq, msg->seq, memory_order_relaxed);
    atomic_store_explicit (&worker->consume_started_ns, start ? start : 1,
                           memory_order_release);
    fh_crash_enter (self->name, fh_plugin_path (self->plugin)); /* named if it dies */
    fanhub_result_t result = self->desc->consume (self->state, msg);
    fh_crash_leave ();
    fh_host_take_reason (worker->reason, sizeof worker->reason);
    *end = self->clock.now_ns (self->clock.arg);
    atomic_store_explicit (&worker->consume_started_ns, 0, memory_order_release);
    if (result == FANHUB_PENDING && ticket) {
        fh_pending_hold (self->pending, ticket);
        return result;
    }
    if (ticket && fh_pending_cancel (self->pending, ticket))
        fh_warning ("consume: consumer '%s': message %llu: the plugin completed it and "
                    "also answered %d; the answer counts", self->name,
                    (unsigned long long) msg->seq, (int) result);
    if (result == FANHUB_PENDING)
        result = FANHUB_FAIL; /* no ticket could be kept: never with the checks */
    fh_histogram_record (&worker->processing, *end - start);
    return result;
}

/* The pending table's wake-up: a completion came. */
static void
s_pending_wake (void *arg)
{
    fh_consumer_t *self = arg;
    if (self->pool) {
        pthread_mutex_lock (&self->pool_lock);
        pthread_cond_broadcast (&self->pool_work);
        pthread_mutex_unlock (&self->pool_lock);
    }
    else
        fh_queue_kick (self->queue);
}

uint64_t
fh_consumer_spool_max_seq (const fh_consumer_t *self)
{
    return self->spool ? fh_spool_max_seq (self->spool) : 0;
}

int
fh_consumer_complete (fh_consumer_t *self, fanhub_ticket_t ticket, fanhub_result_t result)
{
    if (result != FANHUB_OK && result != FANHUB_RETRY && result != FANHUB_FAIL) {
        fh_error ("complete: consumer '%s': ticket %llu: result %d is not OK, RETRY or "
                  "FAIL; taken as FAIL", self->name, (unsigned long long) ticket, (int) result);
        result = FANHUB_FAIL;
    }
    if (fh_pending_complete (self->pending, ticket, result) == 0)
        return 0;
    fh_log_limited (&self->complete_log, FANHUB_LOG_WARNING,
                    "complete: consumer '%s': ticket %llu is not pending (unknown, or "
                    "completed already); ignored",
                    self->name, (unsigned long long) ticket);
    return -1;
}

/* The emit waiter of msg: its own, or its original's when it is a copy
   read back from the spool. */
static fh_emit_t *
s_emit_of (const fh_msg_t *msg)
{
    /* A copy's deferral is set before anyone else sees the copy; an
       original's is the enqueuer's to write, and not read here. */
    return msg->from_spool && msg->deferral ? msg->deferral->emit : msg->emit;
}

/* A message's last word: counted, logged when it failed, its waiter told,
   released. */
static void
s_finish (s_worker_t *worker, fh_msg_t *msg, fanhub_result_t result, const char *why,
          uint32_t attempts, int64_t first_ns, int64_t last_ns)
{
    fh_consumer_t *self = worker->consumer;
    bool stored = false;
    fanhub_bytes_t *frames = NULL;
    uint32_t count = msg->frame_count;
    if (result != FANHUB_OK && self->dead_letters
        && (frames = malloc (count * sizeof *frames))) {
        for (uint32_t i = 0; i < count; i++)
            frames[i] = fh_msg_frame (msg, i);
        int64_t offset = fh_clock_wall_offset_ns ();
        fh_deadletter_item_t item = {
            .seq = msg->seq,
            .received_wall_ns = msg->received_ns + offset,
            .frames = frames,
            .frame_count = count,
            .reason = why,
            .attempts = attempts,
            .first_attempt_ns = first_ns + offset,
            .last_attempt_ns = last_ns + offset,
        };
        char id[FH_DEADLETTER_ID_SIZE], err[512];
        stored = fh_deadletter_add (self->dead_letters, &item, id, err, sizeof err) == 0;
        free (frames);
        if (!stored)
            fh_error ("consumer '%s': message %llu: cannot keep it as a dead letter: %s",
                      self->name, (unsigned long long) msg->seq, err);
    }
    s_progress_begin (worker);
    fh_bump (result == FANHUB_OK ? &worker->completed : &worker->failed);
    if (stored)
        fh_bump (&worker->dead_lettered);
    s_progress_end (worker);
    if (result != FANHUB_OK)
        s_report_failure (worker, msg, why);
    if (s_emit_of (msg))
        fh_emit_set_outcome (s_emit_of (msg), self->name,
                             result == FANHUB_OK ? FH_OUTCOME_COMPLETED : FH_OUTCOME_FAILED);
    /* Done: the spool's cursor may move over it. */
    if (msg->spool_mark && self->spool)
        fh_spool_done (self->spool, msg->spool_mark);
    /* The end of the last attempt is the handling time, unless a test's
       clock measured it: received_ns is always the real clock's. */
    fh_msg_release_at (msg, &worker->handled,
                       self->clock.now_ns == fh_clock_real.now_ns ? last_ns : 0);
}

/* Consumes one message to its end: OK, or FAIL, or RETRY until the
   attempts are used up, waiting out the backoff in between (the message
   stays at the head of the queue: order holds). Returns the clock at the
   end. */
/* After attempt number `attempts` answered result (at end): true when the
   message is to be tried again, after the backoff was waited out here;
   false when it is finished, with why filled for anything but OK. */
static bool
s_again (s_worker_t *worker, fanhub_result_t result, uint32_t attempts, int64_t end,
         bool late, char *why, size_t whylen)
{
    fh_consumer_t *self = worker->consumer;
    const char *verb = late ? "completed with" : "consume answered";
    /* The plugin's own words, when it gave them (host->set_reason). */
    const char *reason = late ? "" : worker->reason;
    const char *colon = reason[0] ? ": " : "";
    if (result == FANHUB_OK)
        return false;
    if (result != FANHUB_RETRY) {
        snprintf (why, whylen, "%s FAIL%s%s", verb, colon, reason);
        return false;
    }
    if (attempts >= self->retry.max_attempts) {
        snprintf (why, whylen, "%s RETRY %u time%s (retry.max_attempts)%s%s", verb, attempts,
                  attempts == 1 ? "" : "s", colon, reason);
        return false;
    }
    if (reason[0])
        fh_log_limited (&worker->retry_log, FANHUB_LOG_WARNING,
                        "consumer '%s': attempt %u answered RETRY: %s; retrying", self->name,
                        attempts, reason);
    s_progress_begin (worker);
    fh_bump (&worker->retried);
    s_progress_end (worker);
    int64_t delay_ms = fh_retry_delay_ms (&self->retry, attempts, &worker->rng);
    if (!self->clock.sleep_until (self->clock.arg, end + delay_ms * 1000000, &self->abort)) {
        snprintf (why, whylen, "stopped while waiting to retry");
        return false;
    }
    return true;
}

/* Attempts from number attempts + 1 on, until the message is finished
   (OK, FAIL, or RETRY until the attempts are used up, waiting out the
   backoff in between: the message stays at the head of the queue, so
   order holds) or the plugin answers PENDING (the pending table has it
   then). Returns the clock at the end. */
static int64_t
s_attempt (s_worker_t *worker, fh_msg_t *msg, uint32_t attempts, int64_t first,
           int64_t start)
{
    fh_consumer_t *self = worker->consumer;
    int64_t end = start;
    fanhub_result_t result;
    char why[512] = "";
    while (true) {
        attempts++;
        fh_pending_item_t item = {
            .msg = msg, .attempts = attempts, .first_ns = first, .started_ns = start};
        fanhub_ticket_t ticket = fh_pending_reserve (self->pending, &item);
        result = s_call_consume (worker, msg, start, &end, ticket);
        if (result == FANHUB_PENDING)
            return end;
        if (!s_again (worker, result, attempts, end, false, why, sizeof why))
            break;
        start = self->clock.now_ns (self->clock.arg);
    }
    s_finish (worker, msg, result, why, attempts, first, end);
    return end;
}

/* Consumes one message from the queue or the spool (see s_attempt). */
static int64_t
s_consume_one (s_worker_t *worker, fh_msg_t *msg, int64_t start)
{
    s_progress_begin (worker);
    fh_bump (&worker->dequeued);
    s_progress_end (worker);
    fh_histogram_record (&worker->queue_wait, start - msg->received_ns);
    return s_attempt (worker, msg, 0, start, start);
}

/* One worker: finishes the messages whose plugin completed them late, in
   the order the completions came. Returns the clock at the end. */
static int64_t
s_take_completions (s_worker_t *worker, int64_t now)
{
    fh_consumer_t *self = worker->consumer;
    fh_pending_item_t item;
    while (fh_pending_take_done (self->pending, &item)) {
        now = self->clock.now_ns (self->clock.arg);
        fh_histogram_record (&worker->processing, now - item.started_ns);
        char why[512] = "";
        if (s_again (worker, item.result, item.attempts, now, true, why, sizeof why))
            now = s_attempt (worker, item.msg, item.attempts, item.first_ns,
                             self->clock.now_ns (self->clock.arg));
        else
            s_finish (worker, item.msg, item.result, why, item.attempts, item.first_ns, now);
    }
    return now;
}

/* The next message from the spool, as a message of its own (one holder,
   this consumer); NULL when the spool is empty, after turning spooling
   off if the memory queue is empty too (new messages go to memory again).
   Only the reading thread calls it. */
static fh_msg_t *
s_spool_next (fh_consumer_t *self)
{
    if (!self->spool || !fh_spool_records (self->spool)) {
        if (self->spool && atomic_load (&self->spooling)) {
            pthread_mutex_lock (&self->spill_lock);
            /* Under the lock the enqueuer cannot spill; while spooling it
               pushes nothing to memory, so an empty queue stays empty. The
               writer's hand-off counts as spool: its messages are older
               than any the queue will take next. */
            if (!s_spool_unread (self) && fh_queue_size (self->queue) == 0
                && !self->write_ahead)
                atomic_store (&self->spooling, false);
            pthread_mutex_unlock (&self->spill_lock);
        }
        return NULL; /* the writer kicks the queue when it has written more */
    }
    fh_spool_record_t record;
    if (fh_spool_read (self->spool, &record) != 1)
        return NULL; /* an I/O error is logged by the spool; try later */
    uint32_t count = record.frame_count;
    zmq_msg_t *frames = malloc (count * sizeof *frames);
    fh_msg_t *msg = NULL;
    if (!frames)
        goto out_of_memory;
    for (uint32_t i = 0; i < count; i++) {
        zmq_msg_init_size (&frames[i], record.frames[i].size);
        memcpy (zmq_msg_data (&frames[i]), record.frames[i].data, record.frames[i].size);
    }
    msg = fh_msg_new (frames, count, record.seq,
                      record.received_wall_ns - fh_clock_wall_offset_ns ());
    for (uint32_t i = 0; i < count; i++)
        zmq_msg_close (&frames[i]);
    free (frames);
    if (msg) {
        msg->from_spool = true;
        msg->spool_mark = record.mark;
        if (record.this_run)
            msg->deferral = s_deferral_of (self, record.seq);
        atomic_store_explicit (&msg->holders, 1, memory_order_relaxed);
        return msg;
    }
out_of_memory:
    /* Lost for this consumer: counted and logged, and done for the spool. */
    atomic_fetch_add (&self->spill_dropped, 1);
    fh_error ("consumer '%s': out of memory: dropped message %llu read from its spool",
              self->name, (unsigned long long) record.seq);
    fh_spool_done (self->spool, record.mark);
    return NULL;
}

/* The spiller: msg was appended to the spool; its completion (handled,
   its emit waiter) now waits for the copy read back. */
static void
s_defer (fh_consumer_t *self, fh_msg_t *msg)
{
    pthread_mutex_lock (&self->deferred_lock);
    if (self->deferred_count == self->deferred_cap
        && (self->deferred_cap < DEFERRED_MAX || msg->emit)) {
        size_t cap = self->deferred_cap ? self->deferred_cap * 2 : 1024;
        struct s_deferred *ring = malloc (cap * sizeof *ring);
        if (ring) {
            fh_memory_populate (ring, cap * sizeof *ring); /* not a fault a page */
            for (size_t i = 0; i < self->deferred_count; i++)
                ring[i] = self->deferred[(self->deferred_head + i) % self->deferred_cap];
            free (self->deferred);
            self->deferred = ring;
            self->deferred_cap = cap;
            self->deferred_head = 0;
        }
    }
    if (self->deferred_count < self->deferred_cap && fh_msg_defer (msg) == 0) {
        self->deferred[(self->deferred_head + self->deferred_count) % self->deferred_cap] =
            (struct s_deferred){msg->seq, msg->deferral};
        self->deferred_count++;
    }
    pthread_mutex_unlock (&self->deferred_lock);
}

/* The reader: the deferral of the record just read (one appended in this
   run), or NULL. Records that were never read back (lost to damage, and
   counted there) let their waiters go. */
static fh_deferral_t *
s_deferral_of (fh_consumer_t *self, uint64_t seq)
{
    fh_deferral_t *found = NULL;
    pthread_mutex_lock (&self->deferred_lock);
    while (self->deferred_count) {
        struct s_deferred *head = &self->deferred[self->deferred_head];
        if (head->seq > seq)
            break;
        self->deferred_head = (self->deferred_head + 1) % self->deferred_cap;
        self->deferred_count--;
        if (head->seq == seq) {
            found = head->deferral;
            break;
        }
        if (!head->deferral)
            continue; /* its write failed: let go already */
        if (head->deferral->emit)
            fh_emit_set_outcome (head->deferral->emit, self->name, FH_OUTCOME_DROPPED);
        fh_deferral_release (head->deferral, NULL, 0);
    }
    pthread_mutex_unlock (&self->deferred_lock);
    return found;
}

/* The spool writer failed to store msg, whose deferral the enqueuer had
   queued: takes it out of the ring, so that its waiter hears now. */
static void
s_undefer (fh_consumer_t *self, uint64_t seq)
{
    fh_deferral_t *deferral = NULL;
    pthread_mutex_lock (&self->deferred_lock);
    for (size_t i = self->deferred_count; i-- > 0;) {
        struct s_deferred *entry = &self->deferred[(self->deferred_head + i) % self->deferred_cap];
        if (entry->seq == seq) {
            deferral = entry->deferral;
            entry->deferral = NULL; /* s_deferral_of passes over it */
            break;
        }
        if (entry->seq < seq)
            break;
    }
    pthread_mutex_unlock (&self->deferred_lock);
    if (deferral)
        fh_deferral_release (deferral, &self->spill_handled, 0);
}

/* Spilled messages not yet read back: in the spool, or still in the
   writer's hand-off (read first: an item leaves it only once its record
   counts in the spool). */
static uint64_t
s_spool_unread (fh_consumer_t *self)
{
    uint64_t handed = self->spool_writer ? fh_spool_writer_pending (self->spool_writer) : 0;
    return handed + fh_spool_records (self->spool);
}

static uint64_t
s_msg_bytes (const fh_msg_t *msg)
{
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < msg->frame_count; i++)
        bytes += fh_msg_frame (msg, i).size;
    return bytes;
}

/* Under spill_lock, from the enqueuer: msg goes to the spool writer,
   which holds this consumer's share of it until it is written. Counted as
   enqueued now (the spill is accepted); its completion waits for the copy
   read back. FULL when the hand-off is full: the disk is behind the bus
   for longer than the hand-off covers, and the enqueuer waits, as for
   `block` (nothing is dropped for a slow disk). */
static fh_offer_t
s_spill_offer (fh_consumer_t *self, fh_msg_t *msg)
{
    uint64_t bytes = s_msg_bytes (msg);
    if (!fh_spool_writer_room (self->spool_writer, bytes))
        return FH_OFFER_FULL;
    /* All before the hand-off: from then on the writer may finish with
       msg, and a reader read it back, at any moment. */
    fh_bump (&self->enqueued);
    if (msg->emit)
        fh_emit_set_outcome (msg->emit, self->name, FH_OUTCOME_PENDING);
    s_defer (self, msg);
    int rc = fh_spool_writer_put (self->spool_writer, msg, msg->frame_count, bytes, false);
    assert (rc == 0); /* the only putter, and the writer only makes room */
    (void) rc;
    return FH_OFFER_TAKEN;
}

/* The spool writer's `describe`: what to store of msg. */
static void
s_spill_describe (void *arg, void *item, fh_spool_entry_t *entry)
{
    (void) arg;
    fh_msg_t *msg = item;
    fanhub_bytes_t *frames = (fanhub_bytes_t *) entry->frames;
    for (uint32_t i = 0; i < entry->frame_count; i++)
        frames[i] = fh_msg_frame (msg, i);
    entry->seq = msg->seq;
    entry->received_wall_ns = msg->received_ns + fh_clock_wall_offset_ns ();
}

/* The spool writer's `written`, on its thread: counted as spilled or,
   when the spool could not take it, as dropped (and its waiter told);
   then the writer's share of msg is released. */
static void
s_spill_written (void *arg, void *item, int rc, int error)
{
    fh_consumer_t *self = arg;
    fh_msg_t *msg = item;
    bool kept_at_shutdown = atomic_load_explicit (&self->spill_keeping, memory_order_relaxed);
    if (rc == 0) {
        fh_bump (&self->spilled);
        /* A message kept at shutdown is not read back in this run. */
        if (kept_at_shutdown && msg->emit)
            fh_emit_set_outcome (msg->emit, self->name, FH_OUTCOME_SPILLED);
    }
    else {
        atomic_fetch_add (&self->spill_dropped, 1);
        if (msg->emit)
            fh_emit_set_outcome (msg->emit, self->name, FH_OUTCOME_DROPPED);
        if (!kept_at_shutdown)
            s_undefer (self, msg->seq);
        fh_log_limited (&self->spill_log, FANHUB_LOG_WARNING,
                        "consumer '%s': dropped message %llu: %s", self->name,
                        (unsigned long long) msg->seq,
                        rc == FH_SPOOL_FULL ? "the spool is full (queue.spool_max_bytes)"
                                            : strerror (error));
    }
    fh_msg_release (msg, &self->spill_handled);
}

/* The spool writer's `wrote`: the reader may have more to read. */
static void
s_spill_wrote (void *arg)
{
    fh_consumer_t *self = arg;
    fh_queue_kick (self->queue);
}

/* At shutdown, a spilling consumer keeps what is queued in memory for the
   next run: onto the end of the spool, when nothing newer is there (when
   spooling, the queue holds the older messages and is consumed instead). */
static void
s_spill_queue_at_shutdown (fh_consumer_t *self)
{
    pthread_mutex_lock (&self->spill_lock);
    /* Not spooling: the hand-off is empty (spooling stops only when it
       is, and only spilling puts into it), so it holds these only. */
    if (!atomic_load (&self->spooling) && fh_queue_size (self->queue) > 0) {
        uint64_t before = atomic_load (&self->spilled);
        atomic_store (&self->spill_keeping, true);
        fh_msg_t *msg;
        /* Still counted as enqueued and not dequeued: backlog holds. */
        while ((msg = fh_queue_pop (self->queue)))
            fh_spool_writer_put (self->spool_writer, msg, msg->frame_count, s_msg_bytes (msg),
                                 true);
        fh_spool_writer_flush (self->spool_writer);
        atomic_store (&self->spill_keeping, false);
        uint64_t kept = atomic_load (&self->spilled) - before;
        if (kept)
            fh_info ("consumer '%s': %llu queued messages kept in its spool for the next run",
                     self->name, (unsigned long long) kept);
    }
    pthread_mutex_unlock (&self->spill_lock);
}

/* Waits for late completions while the plugin holds messages and the
   worker can take no new one (max_pending reached, or the queue is closed
   and drained). False once the hub gives up waiting (abort). */
static bool
s_wait_pending (fh_consumer_t *self)
{
    while (!atomic_load (&self->abort)) {
        if (fh_pending_wait (self->pending, fh_clock_mono_ns () + PENDING_POLL_NS))
            return true;
    }
    return false;
}

/* One worker, one queue: messages in arrival order, one at a time (a
   plugin that answers PENDING may have up to max_pending open). */
static void *
s_worker_thread (void *arg)
{
    s_worker_t *worker = arg;
    fh_consumer_t *self = worker->consumer;
    bool worked = false; /* since the last idle call */
    /* One clock reading per message: the end of one consume is the start
       of the next when the queue was not empty in between. */
    int64_t now = self->clock.now_ns (self->clock.arg);
    while (true) {
        unsigned kicks = fh_queue_kicks (self->queue);
        if (fh_pending_done_count (self->pending)) {
            now = s_take_completions (worker, now);
            worked = true;
        }
        if (fh_pending_full (self->pending)) {
            /* max_pending open: no consume until one completes. idle lets
               a plugin that batches flush. */
            if (worked && self->desc->idle)
                self->desc->idle (self->state);
            worked = false;
            if (!fh_pending_done_count (self->pending) && !s_wait_pending (self))
                break;
            continue;
        }
        bool closed = fh_queue_closed (self->queue);
        bool retiring = atomic_load (&self->retiring);
        if (self->spill_at_shutdown && closed && !retiring)
            s_spill_queue_at_shutdown (self);
        fh_msg_t *msg = fh_queue_pop (self->queue);
        /* The memory queue first: while spooling it holds the older ones.
           At shutdown the spool is left for the next run; when a reload
           replaces this consumer it is consumed too. */
        if (!msg && (!closed || retiring))
            msg = s_spool_next (self);
        if (!msg) {
            if (worked && self->desc->idle)
                self->desc->idle (self->state);
            worked = false;
            if (retiring && self->spool && s_spool_unread (self)) {
                /* The spool still holds some: consume them, once the
                   writer has written what it still has. */
                if (!fh_spool_records (self->spool))
                    fh_spool_writer_flush (self->spool_writer);
                continue;
            }
            if (!fh_queue_wait_since (self->queue, kicks)) {
                /* Closed and drained: what the plugin still holds is
                   waited for (until the hub gives up). */
                if (fh_pending_count (self->pending) == 0
                    || (!fh_pending_done_count (self->pending) && !s_wait_pending (self)))
                    break;
            }
            now = self->clock.now_ns (self->clock.arg);
            continue;
        }
        now = s_consume_one (worker, msg, now);
        worked = true;
    }
    if (worked && self->desc->idle)
        self->desc->idle (self->state);
    atomic_fetch_add (&self->done_workers, 1);
    return NULL;
}

/* Pool mode: messages given to the scheduler and not yet started. With a
   spool, the dispatcher reads it only while this is below the capacity,
   so queue.capacity bounds what the pool holds in memory. */
static uint64_t
s_pool_held (fh_consumer_t *self)
{
    uint64_t handed = atomic_load_explicit (&self->pool_handed, memory_order_relaxed);
    uint64_t started = atomic_load_explicit (&self->pool_started, memory_order_acquire);
    return handed > started ? handed - started : 0;
}

/* Pool mode: moves messages from the queue (and the spool) into the
   per-key scheduler, a batch per lock, and wakes a worker for each. */
static void *
s_dispatcher_thread (void *arg)
{
    fh_consumer_t *self = arg;
    enum { BATCH = 64 };
    fh_msg_t *batch[BATCH];
    char keys[BATCH][FH_ORDER_KEY_MAX];
    size_t key_sizes[BATCH];
    const uint64_t capacity = fh_queue_capacity (self->queue);
    while (true) {
        /* Workers kick the queue as they start messages while a spool
           is read: room for more of it. */
        unsigned kicks = fh_queue_kicks (self->queue);
        bool closed = fh_queue_closed (self->queue);
        bool retiring = atomic_load (&self->retiring);
        if (self->spill_at_shutdown && closed && !retiring)
            s_spill_queue_at_shutdown (self);
        size_t count = 0;
        while (count < BATCH && (batch[count] = fh_queue_pop (self->queue)))
            count++;
        /* The spool after the memory queue, not at shutdown (but when a
           reload replaces this consumer). A record read stays in the spool
           until its message is done (s_finish). */
        bool readable = (!closed || retiring) && self->spool;
        while (count < BATCH && readable && s_pool_held (self) + count < capacity
               && (batch[count] = s_spool_next (self)))
            count++;
        if (count == 0) {
            bool spool_left = readable && fh_spool_records (self->spool);
            if (spool_left && s_pool_held (self) < capacity)
                continue;
            if (!spool_left && readable && closed && s_spool_unread (self)) {
                /* Retiring: the writer still has some to write first. */
                fh_spool_writer_flush (self->spool_writer);
                continue;
            }
            if (spool_left && closed) {
                /* Retiring with a full scheduler: wait for a worker to
                   start one (the queue's wait would not sleep). */
                pthread_mutex_lock (&self->pool_lock);
                if (s_pool_held (self) >= capacity && !atomic_load (&self->abort)) {
                    struct timespec until;
                    int64_t due = fh_clock_mono_ns () + PENDING_POLL_NS;
                    until.tv_sec = (time_t) (due / 1000000000);
                    until.tv_nsec = (long) (due % 1000000000);
                    pthread_cond_timedwait (&self->pool_work, &self->pool_lock, &until);
                }
                pthread_mutex_unlock (&self->pool_lock);
                if (atomic_load (&self->abort))
                    break;
                continue;
            }
            if (!fh_queue_wait_since (self->queue, kicks))
                break; /* closed and drained */
            continue;
        }
        /* Keys outside the lock: extraction may parse JSON. */
        for (size_t i = 0; i < count; i++) {
            key_sizes[i] = FH_ORDER_KEY_MAX;
            if (!self->order_key) {
                memcpy (keys[i], &batch[i]->seq, sizeof batch[i]->seq);
                key_sizes[i] = sizeof batch[i]->seq;
            }
            else if (!fh_order_key_extract (self->order_key, batch[i], keys[i], &key_sizes[i]))
                fh_bump (&self->key_fallback);
        }
        pthread_mutex_lock (&self->pool_lock);
        for (size_t i = 0; i < count; i++) {
            fh_msg_t *replaced = NULL;
            fh_bump (&self->pool_handed);
            if (fh_keyed_push (self->keyed, keys[i], key_sizes[i], batch[i], &replaced) != 0) {
                /* Out of memory: lost for this consumer, and counted. */
                fh_error ("consumer '%s': out of memory: dropped message %llu", self->name,
                          (unsigned long long) batch[i]->seq);
                replaced = batch[i];
            }
            else
                pthread_cond_signal (&self->pool_work);
            if (replaced) {
                fh_bump (&self->coalesced);
                if (s_emit_of (replaced))
                    fh_emit_set_outcome (s_emit_of (replaced), self->name,
                                         FH_OUTCOME_COALESCED);
                atomic_store_explicit (&self->pool_started,
                                       atomic_load (&self->pool_started) + 1,
                                       memory_order_release);
                /* Replaced by a newer one: done with it. */
                if (replaced->spool_mark)
                    fh_spool_done (self->spool, replaced->spool_mark);
                fh_msg_release (replaced, &self->dispatcher_handled);
            }
        }
        pthread_mutex_unlock (&self->pool_lock);
    }
    pthread_mutex_lock (&self->pool_lock);
    self->dispatcher_done = true;
    pthread_cond_broadcast (&self->pool_work);
    pthread_mutex_unlock (&self->pool_lock);
    atomic_fetch_add (&self->done_workers, 1);
    return NULL;
}

/* Pool mode: the last word on one attempt (pool_lock not held; held on
   return): done, or retry later (the key waits; the worker does not). */
static void
s_pool_after (s_worker_t *worker, fh_msg_t *msg, fh_keyed_slot_t *slot,
              fanhub_result_t result, uint32_t attempts, int64_t start, int64_t end, bool late)
{
    fh_consumer_t *self = worker->consumer;
    bool retry = result == FANHUB_RETRY && attempts < self->retry.max_attempts;
    if (retry) {
        if (!late && worker->reason[0])
            fh_log_limited (&worker->retry_log, FANHUB_LOG_WARNING,
                            "consumer '%s': attempt %u answered RETRY: %s; retrying",
                            self->name, attempts, worker->reason);
        s_progress_begin (worker);
        fh_bump (&worker->retried);
        s_progress_end (worker);
        int64_t delay_ms = fh_retry_delay_ms (&self->retry, attempts, &worker->rng);
        pthread_mutex_lock (&self->pool_lock);
        fh_keyed_retry (self->keyed, slot, end + delay_ms * 1000000);
        pthread_cond_signal (&self->pool_work); /* the earliest due may have changed */
        return;
    }
    char why[512] = "";
    const char *verb = late ? "completed with" : "consume answered";
    const char *reason = late ? "" : worker->reason; /* host->set_reason */
    const char *colon = reason[0] ? ": " : "";
    if (result == FANHUB_FAIL)
        snprintf (why, sizeof why, "%s FAIL%s%s", verb, colon, reason);
    else if (result == FANHUB_RETRY)
        snprintf (why, sizeof why, "%s RETRY %u time%s (retry.max_attempts)%s%s", verb,
                  attempts, attempts > 1 ? "s" : "", colon, reason);
    s_finish (worker, msg, result, why, attempts, start, end);
    pthread_mutex_lock (&self->pool_lock);
    fh_keyed_done (self->keyed, slot);
    pthread_cond_signal (&self->pool_work); /* the key may have more */
}

/* Pool mode: takes the next message from the scheduler (round robin over
   keys, one message of a key at a time), consumes it once, and tells the
   scheduler: done, or retry later. A message the plugin answered PENDING
   keeps its key busy until it completes; any worker then finishes it. */
static void *
s_pool_worker_thread (void *arg)
{
    s_worker_t *worker = arg;
    fh_consumer_t *self = worker->consumer;
    pthread_mutex_lock (&self->pool_lock);
    while (true) {
        if (fh_pending_done_count (self->pending)) {
            pthread_mutex_unlock (&self->pool_lock);
            fh_pending_item_t item;
            bool took = fh_pending_take_done (self->pending, &item);
            if (!took) {
                pthread_mutex_lock (&self->pool_lock);
                continue; /* another worker took it */
            }
            int64_t end = self->clock.now_ns (self->clock.arg);
            fh_histogram_record (&worker->processing, end - item.started_ns);
            s_pool_after (worker, item.msg, item.slot, item.result, item.attempts,
                          item.started_ns, end, true);
            self->pool_worked = true;
            continue;
        }
        int64_t now = self->clock.now_ns (self->clock.arg);
        fh_keyed_slot_t *slot = NULL;
        int64_t next_due = INT64_MAX;
        /* Every reservation is made under pool_lock: a table that is not
           full now has room for this one. */
        bool full = fh_pending_full (self->pending);
        fh_msg_t *msg = full ? NULL : fh_keyed_take (self->keyed, now, &slot, &next_due);
        if (!msg) {
            bool drained = fh_keyed_queued (self->keyed) == 0
                           && fh_keyed_busy (self->keyed) == 0;
            if ((drained || full) && self->pool_worked && self->desc->idle) {
                self->pool_worked = false;
                pthread_mutex_unlock (&self->pool_lock);
                self->desc->idle (self->state);
                pthread_mutex_lock (&self->pool_lock);
                continue;
            }
            if (drained && self->dispatcher_done)
                break;
            if (atomic_load (&self->abort))
                break;
            if (next_due == INT64_MAX)
                pthread_cond_wait (&self->pool_work, &self->pool_lock);
            else {
                struct timespec until = {(time_t) (next_due / 1000000000),
                                         (long) (next_due % 1000000000)};
                pthread_cond_timedwait (&self->pool_work, &self->pool_lock, &until);
            }
            continue;
        }
        unsigned retries = fh_keyed_slot_retries (slot);
        if (retries == 0) {
            atomic_store_explicit (&self->pool_started, atomic_load (&self->pool_started) + 1,
                                   memory_order_release);
            if (self->spool)
                fh_queue_kick (self->queue); /* room: the dispatcher may read on */
        }
        self->pool_worked = true;
        fh_pending_item_t item = {
            .msg = msg, .slot = slot, .attempts = retries + 1, .first_ns = now,
            .started_ns = now};
        fanhub_ticket_t ticket = fh_pending_reserve (self->pending, &item);
        pthread_mutex_unlock (&self->pool_lock);

        if (retries == 0) {
            s_progress_begin (worker);
            fh_bump (&worker->dequeued);
            s_progress_end (worker);
            fh_histogram_record (&worker->queue_wait, now - msg->received_ns);
        }
        int64_t end;
        fanhub_result_t result = s_call_consume (worker, msg, now, &end, ticket);
        if (result == FANHUB_PENDING) {
            pthread_mutex_lock (&self->pool_lock);
            continue;
        }
        s_pool_after (worker, msg, slot, result, retries + 1, now, end, false);
    }
    pthread_cond_broadcast (&self->pool_work); /* let the others see the end */
    pthread_mutex_unlock (&self->pool_lock);
    atomic_fetch_add (&self->done_workers, 1);
    return NULL;
}

int
fh_consumer_start (fh_consumer_t *self, char *err, size_t errlen)
{
    if (self->pool) {
        int rc = pthread_create (&self->dispatcher, NULL, s_dispatcher_thread, self);
        if (rc != 0) {
            snprintf (err, errlen, "consumer '%s': cannot start its dispatcher: %s",
                      self->name, strerror (rc));
            return -1;
        }
        self->dispatcher_started = true;
    }
    for (size_t i = 0; i < self->worker_count; i++) {
        s_worker_t *worker = &self->workers[i];
        int rc = pthread_create (&worker->thread, NULL,
                                 self->pool ? s_pool_worker_thread : s_worker_thread, worker);
        if (rc != 0) {
            snprintf (err, errlen, "consumer '%s': cannot start its thread: %s", self->name,
                      strerror (rc));
            return -1;
        }
        worker->started = true;
    }
    return 0;
}

/* Raises a high-water mark that two threads may raise (the enqueuer, and
   a reader that saw a higher backlog first). */
static void
s_raise_max (atomic_uint_fast64_t *max, uint64_t value)
{
    uint64_t seen = atomic_load_explicit (max, memory_order_relaxed);
    while (value > seen
           && !atomic_compare_exchange_weak_explicit (max, &seen, value, memory_order_release,
                                                      memory_order_relaxed))
        ;
}

/* After a push: keeps backlog_max and the warn_at warning. Reads the
   consumer's index (a cache miss) only when the free upper bound says the
   answer might change something. */
static void
s_watch_backlog (fh_consumer_t *self)
{
    size_t warn_at = atomic_load_explicit (&self->warn_at, memory_order_relaxed);
    size_t bound = fh_queue_depth_bound (self->queue);
    uint64_t max = atomic_load_explicit (&self->backlog_max, memory_order_relaxed);
    bool warn_check = warn_at
                      && (self->warn_armed ? bound >= warn_at
                                           : bound >= warn_at / 2);
    if (bound <= max && !warn_check) {
        if (warn_at && !self->warn_armed)
            self->warn_armed = true; /* bound < warn_at / 2: drained enough */
        return;
    }
    size_t depth = fh_queue_depth (self->queue);
    s_raise_max (&self->backlog_max, depth);
    if (!warn_at)
        return;
    if (self->warn_armed && depth >= warn_at) {
        self->warn_armed = false;
        fh_warning ("consumer '%s': backlog reached %zu (queue.warn_at %zu, capacity "
                    "%zu); warns again once it has drained below %zu",
                    self->name, depth, warn_at, fh_queue_capacity (self->queue),
                    warn_at / 2);
    }
    else if (!self->warn_armed && depth < warn_at / 2)
        self->warn_armed = true;
}

/* Pool mode: the queue and the scheduler together hold at most capacity
   messages not yet started. */
static bool
s_pool_full (fh_consumer_t *self)
{
    uint64_t started = atomic_load_explicit (&self->pool_started, memory_order_acquire);
    uint64_t enqueued = atomic_load_explicit (&self->enqueued, memory_order_relaxed);
    uint64_t evicted = atomic_load_explicit (&self->evicted, memory_order_relaxed);
    /* Spilled messages lost before they were read back never start. */
    evicted += atomic_load_explicit (&self->spill_dropped, memory_order_relaxed);
    return enqueued - evicted - started >= fh_queue_capacity (self->queue);
}

fh_offer_t
fh_consumer_offer (fh_consumer_t *self, fh_msg_t *msg, fh_handled_t *handled)
{
    /* The spool is opened by the main thread while this instance may
       already take offers (a reload's successor): read it once opened. */
    bool has_spool = atomic_load_explicit (&self->state_open, memory_order_acquire);
    if (!has_spool && self->wants_write_ahead)
        /* A reload's successor before its spool is open: with write-ahead
           nothing reaches it but through its spool. Wait, as spill does
           when full. */
        return FH_OFFER_FULL;
    /* Spooling: everything new goes behind what is on disk. */
    if (has_spool && atomic_load_explicit (&self->spooling, memory_order_acquire)) {
        pthread_mutex_lock (&self->spill_lock);
        if (atomic_load (&self->spooling)) {
            fh_offer_t offer = s_spill_offer (self, msg);
            pthread_mutex_unlock (&self->spill_lock);
            return offer;
        }
        pthread_mutex_unlock (&self->spill_lock);
    }
    if (fh_queue_full (self->queue) || (self->pool && s_pool_full (self))) {
        switch (self->overflow) {
        case FH_OVERFLOW_BLOCK:
            return FH_OFFER_FULL;
        case FH_OVERFLOW_SPILL:
            if (!has_spool)
                /* A reload's successor before it starts: its spool is still
                   its predecessor's. Spill loses nothing: wait, as block
                   does, until it starts (the enqueuer still hears the
                   control plane meanwhile). */
                return FH_OFFER_FULL;
            pthread_mutex_lock (&self->spill_lock);
            fh_offer_t offer = s_spill_offer (self, msg);
            /* From the first spilled message on, the rest follow it. */
            if (offer == FH_OFFER_TAKEN)
                atomic_store (&self->spooling, true);
            pthread_mutex_unlock (&self->spill_lock);
            return offer;
        case FH_OVERFLOW_DROP_OLDEST: {
            /* The consumer may have made room since the check above. */
            if (!fh_queue_full (self->queue) && !(self->pool && s_pool_full (self)))
                break;
            /* In a pool, messages already with the scheduler stay: when
               the queue itself is empty the new one is dropped instead. */
            fh_msg_t *oldest = fh_queue_evict (self->queue);
            if (oldest) {
                fh_bump (&self->evicted);
                fh_bump (&self->dropped);
                if (oldest->emit)
                    fh_emit_set_outcome (oldest->emit, self->name, FH_OUTCOME_DROPPED);
                fh_msg_release (oldest, handled);
                break; /* room now */
            }
        }
            /* fall through */
        default:
            fh_bump (&self->dropped);
            if (msg->emit)
                fh_emit_set_outcome (msg->emit, self->name, FH_OUTCOME_DROPPED);
            return FH_OFFER_REFUSED;
        }
    }
    if (msg->emit)
        fh_emit_set_outcome (msg->emit, self->name, FH_OUTCOME_PENDING);
    /* Counted before it is visible to the consumer, so no reader sees it
       dequeued but not yet enqueued. With one producer, a queue that had
       room still has it. */
    fh_bump (&self->enqueued);
    bool pushed = fh_queue_push (self->queue, msg);
    assert (pushed);
    (void) pushed;
    s_watch_backlog (self);
    return FH_OFFER_TAKEN;
}

void
fh_consumer_signal (fh_consumer_t *self)
{
    fh_queue_signal (self->queue);
}

void
fh_consumer_count_drop (fh_consumer_t *self, fh_msg_t *msg)
{
    fh_bump (&self->dropped);
    if (msg && msg->emit)
        fh_emit_set_outcome (msg->emit, self->name, FH_OUTCOME_DROPPED);
}

void
fh_consumer_set_warn_at (fh_consumer_t *self, size_t warn_at)
{
    atomic_store_explicit (&self->warn_at, warn_at, memory_order_relaxed);
}

void
fh_consumer_close (fh_consumer_t *self)
{
    fh_queue_close (self->queue);
}

void
fh_consumer_abandon (fh_consumer_t *self)
{
    atomic_store (&self->abort, true);
    if (self->dispatcher_started) {
        pthread_detach (self->dispatcher);
        self->dispatcher_started = false;
    }
    for (size_t i = 0; i < self->worker_count; i++)
        if (self->workers[i].started) {
            pthread_detach (self->workers[i].thread);
            self->workers[i].started = false;
        }
}

bool
fh_consumer_done (fh_consumer_t *self)
{
    size_t started = self->dispatcher_started;
    for (size_t i = 0; i < self->worker_count; i++)
        started += self->workers[i].started;
    return atomic_load (&self->done_workers) >= started;
}

const char *
fh_consumer_name (const fh_consumer_t *self)
{
    return self->name;
}

const fh_shard_t *
fh_consumer_shard (const fh_consumer_t *self)
{
    return self->shard;
}

const char *
fh_consumer_plugin_path (const fh_consumer_t *self)
{
    return fh_plugin_path (self->plugin);
}

/* Sums the workers' counters into out, each worker's consistent with
   each other. */
static void
s_read_workers (fh_consumer_t *self, fh_consumer_counts_t *out)
{
    out->dequeued = out->completed = out->failed = out->retried = out->dead_lettered = 0;
    for (size_t i = 0; i < self->worker_count; i++) {
        s_worker_t *worker = &self->workers[i];
        uint64_t dequeued, completed, failed, retried, dead_lettered;
        unsigned before, after;
        do {
            before = atomic_load_explicit (&worker->progress, memory_order_acquire);
            dequeued = atomic_load_explicit (&worker->dequeued, memory_order_relaxed);
            completed = atomic_load_explicit (&worker->completed, memory_order_relaxed);
            failed = atomic_load_explicit (&worker->failed, memory_order_relaxed);
            retried = atomic_load_explicit (&worker->retried, memory_order_relaxed);
            dead_lettered = atomic_load_explicit (&worker->dead_lettered, memory_order_relaxed);
            atomic_thread_fence (memory_order_acquire);
            after = atomic_load_explicit (&worker->progress, memory_order_relaxed);
        } while (before != after || (before & 1));
        out->dequeued += dequeued;
        out->completed += completed;
        out->failed += failed;
        out->retried += retried;
        out->dead_lettered += dead_lettered;
    }
}

void
fh_consumer_counts (fh_consumer_t *self, fh_consumer_counts_t *out)
{
    memset (out, 0, sizeof *out);
    /* Read before enqueued: never a loss of a message not yet counted in. */
    uint64_t spill_dropped = atomic_load_explicit (&self->spill_dropped, memory_order_acquire);
    /* enqueued is read before and after the workers' counters. When it did
       not move in between, enqueued - dequeued is the backlog at one moment;
       read across pushes and pops it could show more than the queue ever
       held. After a few tries the last reading stands: enqueued, read
       after dequeued, is never behind it. */
    for (int tries = 0;; tries++) {
        uint64_t enqueued = atomic_load_explicit (&self->enqueued, memory_order_acquire);
        s_read_workers (self, out);
        out->enqueued = atomic_load_explicit (&self->enqueued, memory_order_acquire);
        if (out->enqueued == enqueued || tries == COUNTS_TRIES)
            break;
    }
    out->dropped = atomic_load_explicit (&self->dropped, memory_order_acquire) + spill_dropped;
    out->backlog_max = atomic_load_explicit (&self->backlog_max, memory_order_acquire);
    /* Spilled messages the spool could not store were accepted and then
       lost: like evictions, in enqueued and in dropped. */
    out->evicted = atomic_load_explicit (&self->evicted, memory_order_acquire) + spill_dropped;
    out->spilled = atomic_load_explicit (&self->spilled, memory_order_acquire);
    /* A reload's successor opens its spool while STATS may run: only
       once state_open says so is the pointer there to read. */
    if (atomic_load_explicit (&self->state_open, memory_order_acquire) && self->spool) {
        out->spool_bytes = fh_spool_bytes (self->spool);
        out->spool_corrupt = fh_spool_corrupt (self->spool);
        out->spool_cursor_errors = fh_spool_cursor_errors (self->spool);
        out->spool_fsyncs = fh_spool_syncs (self->spool);
        out->spool_handoff = fh_spool_writer_pending (self->spool_writer);
    }
    out->in_flight = out->dequeued - out->completed - out->failed;
    /* coalesced is read after the rest: a message replaced and not yet
       counted shows as backlog for a moment, never below zero. */
    uint64_t coalesced = self->pool ? atomic_load_explicit (&self->coalesced, memory_order_acquire) : 0;
    uint64_t gone = out->dequeued + out->evicted + coalesced;
    out->backlog = out->enqueued > gone ? out->enqueued - gone : 0;
    if (out->backlog > out->backlog_max) {
        /* Seen before the enqueuer noted it: record it, so the maximum
           never goes down from one snapshot to the next. */
        s_raise_max (&self->backlog_max, out->backlog);
        out->backlog_max = out->backlog;
    }
    out->capacity = fh_queue_capacity (self->queue);
    out->stuck = atomic_load_explicit (&self->stuck_workers, memory_order_relaxed);
    out->workers = self->worker_count;
    if (self->pool) {
        out->coalesced = atomic_load_explicit (&self->coalesced, memory_order_acquire);
        out->key_fallback = atomic_load_explicit (&self->key_fallback, memory_order_acquire);
        pthread_mutex_lock (&self->pool_lock);
        out->keys_active = fh_keyed_keys (self->keyed);
        out->key_backlog_max = fh_keyed_key_backlog_high (self->keyed);
        pthread_mutex_unlock (&self->pool_lock);
    }
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
        handled += atomic_load_explicit (&self->workers[i].handled.handled,
                                         memory_order_acquire);
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
        int64_t started = atomic_load_explicit (&worker->consume_started_ns,
                                                memory_order_acquire);
        bool now_stuck = started && now_ns - started > self->consume_timeout_ns;
        if (now_stuck && !worker->stuck)
            fh_warning ("consumer '%s': consume of message %llu has been running for "
                        "%.1f s (consume_timeout %.1f s): stuck; the other consumers "
                        "carry on",
                        self->name,
                        (unsigned long long) atomic_load (&worker->consume_seq),
                        (double) (now_ns - started) / 1e9,
                        (double) self->consume_timeout_ns / 1e9);
        else if (!now_stuck && worker->stuck)
            fh_info ("consumer '%s': no longer stuck", self->name);
        worker->stuck = now_stuck;
        stuck += now_stuck;
    }
    /* Messages the plugin holds PENDING count as calls still running. */
    uint64_t oldest = 0;
    size_t held = fh_pending_older_than (self->pending, now_ns - self->consume_timeout_ns,
                                         &oldest);
    if (held && !self->pending_stuck)
        fh_warning ("consumer '%s': %zu messages pending for more than consume_timeout "
                    "%.1f s (the oldest is message %llu): stuck; the other consumers carry on",
                    self->name, held, (double) self->consume_timeout_ns / 1e9,
                    (unsigned long long) oldest);
    else if (!held && self->pending_stuck)
        fh_info ("consumer '%s': no pending message is stuck any more", self->name);
    self->pending_stuck = held > 0;
    stuck += held;
    atomic_store_explicit (&self->stuck_workers, (unsigned) stuck, memory_order_relaxed);
    return stuck;
}
