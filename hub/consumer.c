/*  consumer - one configured consumer: plugin, queue, thread, counters.
    See consumer.h. */
#include "consumer.h"

#include "clock.h"
#include "host.h"
#include "log.h"
#include "plugin.h"
#include "queue.h"

#include <assert.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_LINE 64
#define FAILURE_LOG_INTERVAL_NS (10 * INT64_C (1000000000))

/* A counter with one writer: a plain load and store, no locked add. The
   release store orders it after the writer's earlier counters, so a reader
   that loads the later stage first never sees it ahead of an earlier one. */
static inline void
s_bump (atomic_uint_fast64_t *counter)
{
    atomic_store_explicit (
        counter, atomic_load_explicit (counter, memory_order_relaxed) + 1,
        memory_order_release);
}

struct fh_consumer {
    /* Written by the enqueuer thread. */
    alignas (CACHE_LINE) atomic_uint_fast64_t enqueued;
    atomic_uint_fast64_t dropped;
    atomic_uint_fast64_t backlog_max;
    bool warn_armed; /* the next crossing of warn_at is logged */
    size_t warn_at;
    /* Written by the consumer's thread; the counters under `progress`. */
    alignas (CACHE_LINE) atomic_uint progress; /* odd while changing */
    atomic_uint_fast64_t dequeued;
    atomic_uint_fast64_t completed;
    atomic_uint_fast64_t failed;
    atomic_bool done;
    fh_ratelimit_t failure_log;
    fh_histogram_t queue_wait;
    fh_histogram_t processing;

    alignas (CACHE_LINE) char *name;
    fh_queue_t *queue;
    fh_plugin_t *plugin;
    const fanhub_consumer_desc_t *desc;
    void *state;
    bool initialized; /* init succeeded: fini is owed */
    bool started;
    pthread_t thread;
    fanhub_ctx_t ctx;
};

fh_consumer_t *
fh_consumer_new (const fh_consumer_config_t *config, const char *plugin_dir,
                 char *err, size_t errlen)
{
    fh_consumer_t *self = aligned_alloc (CACHE_LINE, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "%s: consumer '%s': out of memory", config->where,
                  config->name);
        return NULL;
    }
    memset (self, 0, sizeof *self);
    fh_histogram_init (&self->queue_wait);
    fh_histogram_init (&self->processing);
    self->warn_at = config->warn_at;
    self->warn_armed = true;
    self->name = strdup (config->name);
    self->queue = fh_queue_new (config->queue_capacity);
    if (!self->name || !self->queue) {
        snprintf (err, errlen, "%s: consumer '%s': out of memory", config->where,
                  config->name);
        fh_consumer_destroy (&self);
        return NULL;
    }
    self->ctx.consumer_name = self->name;

    char why[1024];
    self->plugin = fh_plugin_load (config->plugin, plugin_dir, why, sizeof why);
    if (!self->plugin) {
        snprintf (err, errlen, "%s: consumer '%s': %s", config->where, config->name, why);
        fh_consumer_destroy (&self);
        return NULL;
    }
    self->desc = fh_plugin_desc (self->plugin);
    if (self->desc->init) {
        why[0] = '\0';
        if (self->desc->init (&fh_host, &self->ctx, config->options, &self->state,
                              why, sizeof why)
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

void
fh_consumer_destroy (fh_consumer_t **self_p)
{
    fh_consumer_t *self = *self_p;
    if (!self)
        return;
    if (self->started)
        pthread_join (self->thread, NULL);
    if (self->initialized && self->desc->fini)
        self->desc->fini (self->state);
    fh_queue_destroy (&self->queue);
    fh_plugin_destroy (&self->plugin);
    free (self->name);
    free (self);
    *self_p = NULL;
}

static void
s_report_failure (fh_consumer_t *self, const fh_msg_t *msg, fanhub_result_t result)
{
    uint64_t suppressed;
    if (!fh_ratelimit_allow (&self->failure_log, fh_clock_mono_ns (),
                             FAILURE_LOG_INTERVAL_NS, &suppressed))
        return;
    fanhub_bytes_t topic = fh_msg_frame (msg, 0);
    fh_warning ("consumer '%s': message %llu (%.*s) failed: consume answered %s"
                "%s (%llu more failures not logged)",
                self->name, (unsigned long long) msg->seq, (int) topic.size,
                (const char *) topic.data,
                result == FANHUB_RETRY ? "RETRY" : "FAIL",
                result == FANHUB_RETRY ? ", and retries are not configured" : "",
                (unsigned long long) suppressed);
}

/* The sequence lock around the consumer thread's counters. */
static inline void
s_progress_begin (fh_consumer_t *self)
{
    unsigned v = atomic_load_explicit (&self->progress, memory_order_relaxed);
    atomic_store_explicit (&self->progress, v + 1, memory_order_relaxed);
    atomic_thread_fence (memory_order_release);
}

static inline void
s_progress_end (fh_consumer_t *self)
{
    unsigned v = atomic_load_explicit (&self->progress, memory_order_relaxed);
    atomic_store_explicit (&self->progress, v + 1, memory_order_release);
}

static void *
s_consumer_thread (void *arg)
{
    fh_consumer_t *self = arg;
    bool worked = false; /* since the last idle call */
    /* One clock reading per message: the end of one consume is the start
       of the next when the queue was not empty in between. */
    int64_t now = fh_clock_mono_ns ();
    while (true) {
        fh_msg_t *msg = fh_queue_pop (self->queue);
        if (!msg) {
            if (worked && self->desc->idle)
                self->desc->idle (self->state);
            worked = false;
            if (!fh_queue_wait (self->queue))
                break; /* closed and drained */
            now = fh_clock_mono_ns ();
            continue;
        }
        int64_t start = now;
        s_progress_begin (self);
        s_bump (&self->dequeued);
        s_progress_end (self);
        fh_histogram_record (&self->queue_wait, start - msg->received_ns);

        fanhub_result_t result = self->desc->consume (self->state, msg);

        now = fh_clock_mono_ns ();
        fh_histogram_record (&self->processing, now - start);
        s_progress_begin (self);
        s_bump (result == FANHUB_OK ? &self->completed : &self->failed);
        s_progress_end (self);
        if (result != FANHUB_OK)
            s_report_failure (self, msg, result);
        fh_msg_release (msg);
        worked = true;
    }
    if (worked && self->desc->idle)
        self->desc->idle (self->state);
    atomic_store (&self->done, true);
    return NULL;
}

int
fh_consumer_start (fh_consumer_t *self, char *err, size_t errlen)
{
    int rc = pthread_create (&self->thread, NULL, s_consumer_thread, self);
    if (rc != 0) {
        snprintf (err, errlen, "consumer '%s': cannot start its thread: %s",
                  self->name, strerror (rc));
        return -1;
    }
    self->started = true;
    return 0;
}

/* After a push: keeps backlog_max and the warn_at warning. Reads the
   consumer's index (a cache miss) only when the free upper bound says the
   answer might change something. */
static void
s_watch_backlog (fh_consumer_t *self)
{
    size_t bound = fh_queue_depth_bound (self->queue);
    uint64_t max = atomic_load_explicit (&self->backlog_max, memory_order_relaxed);
    bool warn_check = self->warn_at
                      && (self->warn_armed ? bound >= self->warn_at
                                           : bound >= self->warn_at / 2);
    if (bound <= max && !warn_check) {
        if (self->warn_at && !self->warn_armed)
            self->warn_armed = true; /* bound < warn_at / 2: drained enough */
        return;
    }
    size_t depth = fh_queue_depth (self->queue);
    if (depth > max)
        atomic_store_explicit (&self->backlog_max, depth, memory_order_release);
    if (!self->warn_at)
        return;
    if (self->warn_armed && depth >= self->warn_at) {
        self->warn_armed = false;
        fh_warning ("consumer '%s': backlog reached %zu (queue.warn_at %zu, capacity "
                    "%zu); warns again once it has drained below %zu",
                    self->name, depth, self->warn_at, fh_queue_capacity (self->queue),
                    self->warn_at / 2);
    }
    else if (!self->warn_armed && depth < self->warn_at / 2)
        self->warn_armed = true;
}

bool
fh_consumer_offer (fh_consumer_t *self, fh_msg_t *msg)
{
    if (fh_queue_full (self->queue)) {
        s_bump (&self->dropped);
        return false;
    }
    /* Counted before it is visible to the consumer, so no reader sees it
       dequeued but not yet enqueued. With one producer, a queue that had
       room still has it. */
    s_bump (&self->enqueued);
    bool pushed = fh_queue_push (self->queue, msg);
    assert (pushed);
    (void) pushed;
    s_watch_backlog (self);
    return true;
}

void
fh_consumer_count_drop (fh_consumer_t *self)
{
    s_bump (&self->dropped);
}

void
fh_consumer_close (fh_consumer_t *self)
{
    fh_queue_close (self->queue);
}

void
fh_consumer_abandon (fh_consumer_t *self)
{
    if (self->started)
        pthread_detach (self->thread);
    self->started = false;
}

bool
fh_consumer_done (fh_consumer_t *self)
{
    return atomic_load (&self->done) || !self->started;
}

const char *
fh_consumer_name (const fh_consumer_t *self)
{
    return self->name;
}

const char *
fh_consumer_plugin_path (const fh_consumer_t *self)
{
    return fh_plugin_path (self->plugin);
}

void
fh_consumer_counts (fh_consumer_t *self, fh_consumer_counts_t *out)
{
    /* The consumer thread's counters, consistent with each other. */
    unsigned before, after;
    do {
        before = atomic_load_explicit (&self->progress, memory_order_acquire);
        out->dequeued = atomic_load_explicit (&self->dequeued, memory_order_relaxed);
        out->completed = atomic_load_explicit (&self->completed, memory_order_relaxed);
        out->failed = atomic_load_explicit (&self->failed, memory_order_relaxed);
        atomic_thread_fence (memory_order_acquire);
        after = atomic_load_explicit (&self->progress, memory_order_relaxed);
    } while (before != after || (before & 1));
    /* Then the enqueuer's: enqueued is counted before a message can be
       dequeued, so read after dequeued it is never behind. */
    out->dropped = atomic_load_explicit (&self->dropped, memory_order_acquire);
    out->enqueued = atomic_load_explicit (&self->enqueued, memory_order_acquire);
    out->backlog_max = atomic_load_explicit (&self->backlog_max, memory_order_acquire);
    out->in_flight = out->dequeued - out->completed - out->failed;
    out->backlog = out->enqueued - out->dequeued;
    if (out->backlog > out->backlog_max)
        out->backlog_max = out->backlog; /* seen before the enqueuer noted it */
    out->capacity = fh_queue_capacity (self->queue);
}

void
fh_consumer_latency (fh_consumer_t *self, fh_histogram_snapshot_t *queue_wait,
                     fh_histogram_snapshot_t *processing)
{
    if (queue_wait)
        fh_histogram_read (&self->queue_wait, queue_wait);
    if (processing)
        fh_histogram_read (&self->processing, processing);
}
