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
    /* Written by the consumer's thread. */
    alignas (CACHE_LINE) atomic_uint_fast64_t dequeued;
    atomic_uint_fast64_t completed;
    atomic_uint_fast64_t failed;
    atomic_bool done;
    fh_ratelimit_t failure_log;

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

static void *
s_consumer_thread (void *arg)
{
    fh_consumer_t *self = arg;
    bool worked = false; /* since the last idle call */
    while (true) {
        fh_msg_t *msg = fh_queue_pop (self->queue);
        if (!msg) {
            if (worked && self->desc->idle)
                self->desc->idle (self->state);
            worked = false;
            if (!fh_queue_wait (self->queue))
                break; /* closed and drained */
            continue;
        }
        s_bump (&self->dequeued);
        fanhub_result_t result = self->desc->consume (self->state, msg);
        if (result == FANHUB_OK)
            s_bump (&self->completed);
        else {
            s_bump (&self->failed);
            s_report_failure (self, msg, result);
        }
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

bool
fh_consumer_done (fh_consumer_t *self)
{
    return !self->started || atomic_load (&self->done);
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
    /* Read the later stages first, so a snapshot never shows more
       consumed than enqueued. */
    out->completed = atomic_load (&self->completed);
    out->failed = atomic_load (&self->failed);
    out->dequeued = atomic_load (&self->dequeued);
    out->dropped = atomic_load (&self->dropped);
    out->enqueued = atomic_load (&self->enqueued);
}
