/*  consumer - one configured consumer: plugin, queue, workers, counters.
    See consumer.h; consumer_internal.h says how the files share the work.

    This file: creating and destroying a consumer, starting its threads,
    close, retire, abandon, the accessors, the counters and histograms,
    the stuck check.
*/
#include "consumer_internal.h"

#include "fanhub/sdk.h"

#include "crash.h"
#include "metrics.h"
#include "option_table.h"
#include "plugin_metrics.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNTS_TRIES 64 /* readings of a consumer's counters before one must do */

static void s_release_unhandled (fh_msg_t *msg, void *arg);

int
fh_consumer_fits_plugin (const fh_consumer_config_t *config, const fanhub_consumer_desc_t *desc,
                         char *err, size_t errlen)
{
    size_t workers = config->workers ? config->workers : 1;
    if (workers > 1 && !(desc->flags & FANHUB_CONSUMER_THREAD_SAFE)) {
        snprintf (err, errlen,
                  "%s: consumer '%s': workers: %zu, but plugin '%s' does not declare "
                  "itself thread-safe (FANHUB_CONSUMER_THREAD_SAFE); use workers: 1",
                  config->where, config->name, workers, config->plugin);
        return -1;
    }
    /* Options of the wrong form are refused here, before init or check
       runs: a plugin with a table never sees them. */
    const fanhub_opt_t *table = fh_host_desc_options (desc);
    char why[1024];
    if (table
        && fh_option_table_check (&fh_host, desc->name, table, config->options, why, sizeof why)
               != 0) {
        snprintf (err, errlen, "%s: consumer '%s': plugin '%s' refused its options: %s",
                  config->where, config->name, config->plugin, why);
        return -1;
    }
    return 0;
}

/* fh_consumer_new's step for pool mode: the scheduler, its lock and
   condition, the order key. -1 with err set; the caller destroys. */
/* `fanhub pause`'s lock and condition (timed waits on the monotonic
   clock: fh_cons_pause_wait). */
static void
s_init_pause (fh_consumer_t *self)
{
    pthread_mutex_init (&self->pause_lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init (&attr);
    pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
    pthread_cond_init (&self->pause_cond, &attr);
    pthread_condattr_destroy (&attr);
}

static int
s_init_pool (fh_consumer_t *self, const fh_consumer_config_t *config, char *err, size_t errlen)
{
    char why[1024];
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
            snprintf (err, errlen, "%s: consumer '%s': order_by: %s", config->where, config->name,
                      why);
            return -1;
        }
    }
    if (!self->keyed) {
        snprintf (err, errlen, "%s: consumer '%s': out of memory", config->where, config->name);
        return -1;
    }
    return 0;
}

/* fh_consumer_new's step for publish: its publisher (publish.h), made
   before init so that init may publish once the consumer starts. -1
   with err set; the caller destroys. */
static int
s_init_publisher (fh_consumer_t *self, const fh_consumer_config_t *config, char *err, size_t errlen)
{
    const fh_publish_config_t *publish = &config->publish;
    char why[1024];
    if ((publish->bind.count + publish->connect.count || publish->local)
        && !(self->publisher = fh_publisher_new (self->name, publish, why, sizeof why))) {
        snprintf (err, errlen, "%s: %s", config->where, why);
        return -1;
    }
    return 0;
}

/* fh_consumer_new's last step: the plugin loaded, checked against the
   configuration, and its init called. -1 with err set; the caller
   destroys (fini is owed only once `initialized` is set). */
static int
s_load_plugin (fh_consumer_t *self, const fh_consumer_config_t *config, const char *plugin_dir,
               char *err, size_t errlen)
{
    char why[1024];
    self->plugin = fh_plugin_load (config->plugin, plugin_dir, why, sizeof why);
    if (!self->plugin) {
        snprintf (err, errlen, "%s: consumer '%s': %s", config->where, config->name, why);
        return -1;
    }
    self->ctx->desc = self->desc = fh_plugin_desc (self->plugin); /* desc: options_load's */
    fh_host_ctx_set_plugin (self->ctx, fh_plugin_path (self->plugin));
    self->reopen = fh_plugin_reopen (self->plugin);
    /* init opens afresh: the requests made so far are answered. */
    fh_cons_reopen_answered (self);
    if (fh_consumer_fits_plugin (config, self->desc, err, errlen) != 0)
        return -1;
    self->crash_site = (fh_crash_site_t){self->name, fh_plugin_path (self->plugin), -1};
    if (self->desc->init) {
        why[0] = '\0';
        fh_crash_enter (&self->crash_site, "init", NULL);
        int rc = self->desc->init (&fh_host, self->ctx, config->options, &self->state, why,
                                   sizeof why);
        fh_crash_leave ();
        if (rc != 0) {
            why[sizeof why - 1] = '\0';
            snprintf (err, errlen, "%s: consumer '%s': plugin '%s' refused its options: %s",
                      config->where, config->name, config->plugin,
                      why[0] ? why : "(init gave no reason)");
            return -1;
        }
    }
    return 0;
}

fh_consumer_t *
fh_consumer_new (const fh_consumer_config_t *config, size_t index, const char *plugin_dir,
                 char *err, size_t errlen)
{
    fh_consumer_t *self = aligned_alloc (FH_CACHE_LINE, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "%s: consumer '%s': out of memory", config->where, config->name);
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
    self->max_bytes = config->queue_max_bytes;
    self->wants_write_ahead = config->write_ahead && config->overflow == FH_OVERFLOW_SPILL;
    self->max_crashes = config->max_crashes ? (uint32_t) config->max_crashes
                                            : FH_DEFAULT_MAX_CRASHES;
    fh_handled_init (&self->spill_handled);
    pthread_mutex_init (&self->spill_lock, NULL);
    pthread_mutex_init (&self->reopen_lock, NULL);
    pthread_mutex_init (&self->error_lock, NULL);
    s_init_pause (self);
    self->max_pending = config->max_pending ? config->max_pending : FH_DEFAULT_MAX_PENDING;
    self->name = strdup (config->name);
    self->queue = fh_queue_new (config->queue_capacity);
    self->workers = aligned_alloc (FH_CACHE_LINE, self->worker_count * sizeof *self->workers);
    if (!self->name || !self->queue || !self->workers) {
        snprintf (err, errlen, "%s: consumer '%s': out of memory", config->where, config->name);
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
    self->ctx = fh_host_ctx_new (self, self->name);
    self->pending
        = fh_pending_new (config->max_pending ? config->max_pending : FH_DEFAULT_MAX_PENDING,
                          fh_cons_pending_wake, self);
    if (!self->pending || !self->ctx) {
        snprintf (err, errlen, "%s: consumer '%s': out of memory", config->where, config->name);
        fh_consumer_destroy (&self);
        return NULL;
    }
    self->ticket_grace_ns = 10 * INT64_C (1000000000);
    /* Read-ahead of the spool past a record not done: what the plugin may
       hold, what the workers run, and (a pool) what waits unstarted. */
    self->spool_window
        = (config->max_pending ? config->max_pending : FH_DEFAULT_MAX_PENDING) + self->worker_count
          + (self->worker_count > 1 || config->coalesce ? config->queue_capacity : 0);

    char why[1024];
    if (config->shard.count
        && !(self->shard = fh_shard_new (config->shard.index, config->shard.count, config->order_by,
                                         why, sizeof why))) {
        snprintf (err, errlen, "%s: consumer '%s': shard: %s", config->where, config->name, why);
        fh_consumer_destroy (&self);
        return NULL;
    }
    self->pool = self->worker_count > 1 || config->coalesce;
    if ((self->pool && s_init_pool (self, config, err, errlen) != 0)
        || s_init_publisher (self, config, err, errlen) != 0
        || s_load_plugin (self, config, plugin_dir, err, errlen) != 0) {
        fh_consumer_destroy (&self);
        return NULL;
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
    fh_thread_join (&self->dispatcher);
    for (size_t i = 0; self->workers && i < self->worker_count; i++)
        fh_thread_join (&self->workers[i].thread);
    /* What it was handed is written before the spool closes (and before
       a reload's successor can open it: it waits for this destroy). */
    fh_spool_writer_destroy (&self->spool_writer);
    if (self->initialized && self->desc->fini) {
        fh_crash_enter (&self->crash_site, "fini", NULL);
        self->desc->fini (self->state);
        fh_crash_leave ();
    }
    /* The plugin may still hold ctx (a thread fini did not wait for): the
       host answers it without this consumer from now on. */
    fh_host_ctx_retire (&self->ctx);
    fh_publisher_destroy (&self->publisher); /* after fini, which may publish */
    /* Completions that came too late (or never): not done, so a spooled
       one stays in the spool for the next run. */
    fh_pending_item_t late;
    while (self->pending && fh_pending_take_done (self->pending, &late)) {
        free (late.reason);
        fh_msg_release (late.msg, NULL);
    }
    fh_pending_destroy (&self->pending, s_release_unhandled, NULL);
    fh_shard_destroy (&self->shard);
    if (self->pool) {
        fh_keyed_destroy (&self->keyed, s_release_unhandled, NULL);
        fh_order_key_destroy (&self->order_key);
        pthread_mutex_destroy (&self->pool_lock);
        pthread_cond_destroy (&self->pool_work);
    }
    fh_queue_destroy (&self->queue);
    /* What it still held leaves memory with it. */
    fh_cons_held_less (self, atomic_load (&self->held_bytes));
    fh_spool_close_checked (&self->spool, NULL); /* a failure is logged and
                                                    makes the exit status */
    /* Spilled and never read back in this run: they wait in the spool;
       their waiters are let go. */
    for (size_t i = 0; i < self->deferred_count; i++) {
        fh_deferral_t *deferral
            = self->deferred[(self->deferred_head + i) % self->deferred_cap].deferral;
        if (deferral) /* NULL: its write failed, let go already */
            fh_deferral_release (deferral, NULL, 0);
    }
    free (self->deferred);
    fh_deadletter_close (&self->dead_letters);
    fh_crashlog_close (&self->crashlog);
    pthread_mutex_destroy (&self->spill_lock);
    pthread_mutex_destroy (&self->reopen_lock);
    pthread_mutex_destroy (&self->error_lock);
    pthread_mutex_destroy (&self->pause_lock);
    pthread_cond_destroy (&self->pause_cond);
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

void
fh_consumer_tick (fh_consumer_t *self, int64_t now_ns)
{
    if (self->spool)
        fh_spool_tick (self->spool, now_ns);
    if (self->publisher)
        fh_publisher_tick (self->publisher);
}

void
fh_consumer_figures_final (fh_consumer_t *self)
{
    fh_host_ctx_stale (self->ctx);
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

/* Threads are named for `top -H`: "fh:c:NAME" for a single worker, in a
   pool "fh:d:NAME" for the dispatcher and "fh:wI:NAME" for worker I (the
   kernel keeps 15 bytes, so a long NAME is cut). */
int
fh_consumer_start (fh_consumer_t *self, char *err, size_t errlen)
{
    char name[64], why[256];
    if (self->publisher && fh_publisher_open (self->publisher, err, errlen) != 0)
        return -1;
    if (self->pool) {
        snprintf (name, sizeof name, "fh:d:%s", self->name);
        if (fh_thread_start (&self->dispatcher, name, fh_cons_dispatcher_thread, self, why,
                             sizeof why)
            != 0) {
            snprintf (err, errlen, "consumer '%s': %s", self->name, why);
            return -1;
        }
    }
    for (size_t i = 0; i < self->worker_count; i++) {
        s_worker_t *worker = &self->workers[i];
        if (self->pool)
            snprintf (name, sizeof name, "fh:w%zu:%s", i, self->name);
        else
            snprintf (name, sizeof name, "fh:c:%s", self->name);
        if (fh_thread_start (&worker->thread, name,
                             self->pool ? fh_cons_pool_worker_thread : fh_cons_worker_thread,
                             worker, why, sizeof why)
            != 0) {
            snprintf (err, errlen, "consumer '%s': %s", self->name, why);
            return -1;
        }
    }
    return 0;
}

void
fh_consumer_close (fh_consumer_t *self)
{
    fh_consumer_bound_tickets (self);
    fh_queue_close (self->queue);
}

int
fh_consumer_overflow (const fh_consumer_t *self)
{
    return self->overflow;
}

void
fh_consumer_set_ticket_grace (fh_consumer_t *self, int64_t grace_ns)
{
    self->ticket_grace_ns = grace_ns;
}

void
fh_consumer_bound_tickets (fh_consumer_t *self)
{
    int_fast64_t none = 0;
    int64_t deadline = fh_clock_mono_ns () + self->ticket_grace_ns / 4 * 3;
    if (!atomic_compare_exchange_strong (&self->close_deadline_ns, &none, deadline ? deadline : 1))
        return;
    /* Workers asleep on an older deadline look again. */
    if (self->pool)
        fh_cons_pool_wake_all (self);
}

void
fh_consumer_abandon (fh_consumer_t *self)
{
    atomic_store (&self->abort, true);
    fh_thread_detach (&self->dispatcher);
    for (size_t i = 0; i < self->worker_count; i++)
        fh_thread_detach (&self->workers[i].thread);
}

bool
fh_consumer_ended (fh_consumer_t *self)
{
    size_t started = fh_thread_started (&self->dispatcher);
    for (size_t i = 0; i < self->worker_count; i++)
        started += fh_thread_started (&self->workers[i].thread);
    return atomic_load (&self->done_workers) >= started;
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

const char *
fh_consumer_plugin_version (const fh_consumer_t *self)
{
    return self->desc && self->desc->version ? self->desc->version : "";
}

/* What a plugin tells of itself (ABI 1.3): its state (up, down, halted)
   with the last error, its counters (restarts, skipped), and the settings
   it may ask for. The worker plugin is the reason: its processes live
   outside the hub, and an operator needs to see in `fanhub stats` that a
   consumer is down and why, without reading the log. */
static atomic_bool s_stopping;

void
fh_consumer_note_stopping (void)
{
    atomic_store (&s_stopping, true);
}

bool
fh_consumer_stopping (void)
{
    return atomic_load (&s_stopping);
}

int64_t
fh_consumer_setting (fh_consumer_t *self, const char *name)
{
    if (!name)
        return -1;
    if (strcmp (name, "stopping") == 0)
        return atomic_load (&s_stopping) ? 1 : 0;
    if (strcmp (name, "workers") == 0)
        return (int64_t) self->worker_count;
    if (strcmp (name, "max_pending") == 0)
        return self->max_pending;
    if (strcmp (name, "consume_timeout_ms") == 0)
        return self->consume_timeout_ns / 1000000;
    if (strcmp (name, "retry.max_attempts") == 0)
        return (int64_t) self->retry.max_attempts;
    if (strcmp (name, "max_crashes") == 0)
        return (int64_t) self->max_crashes;
    return -1;
}

void
fh_consumer_set_state (fh_consumer_t *self, int state, const char *error)
{
    if (state < FANHUB_STATE_UP || state > FANHUB_STATE_HALTED) {
        fh_warning ("set_state: consumer '%s': state %d is not UP, DOWN or HALTED; ignored",
                    self->name, state);
        return;
    }
    if (error) {
        pthread_mutex_lock (&self->error_lock);
        fanhub_utf8_copy (self->last_error, sizeof self->last_error, error);
        self->last_error[strcspn (self->last_error, "\r\n")] = '\0'; /* one line */
        pthread_mutex_unlock (&self->error_lock);
    }
    atomic_store_explicit (&self->plugin_state, state, memory_order_release);
}

void
fh_consumer_count (fh_consumer_t *self, int counter, uint64_t n)
{
    if (counter == FANHUB_COUNT_RESTARTS)
        atomic_fetch_add_explicit (&self->restarts, n, memory_order_relaxed);
    else if (counter == FANHUB_COUNT_SKIPPED)
        atomic_fetch_add_explicit (&self->skipped, n, memory_order_relaxed);
    else
        fh_warning ("count: consumer '%s': no counter %d; ignored", self->name, counter);
}

void
fh_consumer_set_window (fh_consumer_t *self, size_t n)
{
    if (self->pending)
        fh_pending_set_window (self->pending, n);
}

void
fh_consumer_ticket_started (fh_consumer_t *self, fanhub_ticket_t ticket)
{
    if (self->pending)
        fh_pending_started (self->pending, ticket, self->clock.now_ns (self->clock.arg));
}

int
fh_consumer_publish (fh_consumer_t *self, const char *topic, const void *body, size_t size)
{
    if (self->publisher)
        return fh_publisher_send (self->publisher, topic, body, size);
    if (atomic_fetch_add (&self->publish_unset, 1) == 0)
        fh_warning ("consumer '%s': its plugin publishes, but the consumer has no publish: "
                    "settings; dropped (counted in publish_failed; this is said once)",
                    self->name);
    return -1;
}

void
fh_consumer_publish_endpoints (fh_consumer_t *self, char *buf, size_t size)
{
    if (self->publisher)
        fh_publisher_endpoints (self->publisher, buf, size);
    else if (size)
        buf[0] = '\0';
}

const struct fh_plugin_metrics *
fh_consumer_plugin_metrics (const fh_consumer_t *self)
{
    return self->ctx ? fh_plugin_metrics_of (&self->ctx->metrics) : NULL;
}

void
fh_consumer_last_error (fh_consumer_t *self, char *buf, size_t size)
{
    pthread_mutex_lock (&self->error_lock);
    fanhub_utf8_copy (buf, size, self->last_error);
    pthread_mutex_unlock (&self->error_lock);
}

void
fh_consumer_set_paused (fh_consumer_t *self, bool paused)
{
    pthread_mutex_lock (&self->pause_lock);
    atomic_store (&self->paused, paused);
    pthread_cond_broadcast (&self->pause_cond);
    pthread_mutex_unlock (&self->pause_lock);
}

bool
fh_consumer_paused (fh_consumer_t *self)
{
    return atomic_load (&self->paused);
}

int
fh_consumer_plugin_state (fh_consumer_t *self)
{
    return atomic_load_explicit (&self->plugin_state, memory_order_acquire);
}

static void
s_report_counts (fh_consumer_t *self, fh_consumer_counts_t *out)
{
    out->restarts = atomic_load_explicit (&self->restarts, memory_order_relaxed);
    out->skipped = atomic_load_explicit (&self->skipped, memory_order_relaxed);
    out->published = self->publisher ? fh_publisher_published (self->publisher) : 0;
    out->publish_failed = atomic_load_explicit (&self->publish_unset, memory_order_relaxed)
                          + (self->publisher ? fh_publisher_failed (self->publisher) : 0);
    out->plugin_state = atomic_load (&self->paused) ? FH_CONSUMER_PAUSED
                                                    : (uint64_t) atomic_load_explicit (
                                                        &self->plugin_state, memory_order_acquire);
    /* The status page's on-disk share of the backlog: only once
       state_open says so is the spool there to read. */
    if (atomic_load_explicit (&self->state_open, memory_order_acquire) && self->spool)
        out->spool_messages = fh_spool_records (self->spool);
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
        out->spool_lost = fh_spool_lost (self->spool);
        out->spool_fsyncs = fh_spool_syncs (self->spool);
        out->spool_handoff = fh_spool_writer_pending (self->spool_writer);
    }
    /* Read after the workers' counters: an abandoned ticket is in
       dequeued already. */
    out->tickets_expired = atomic_load_explicit (&self->tickets_expired, memory_order_relaxed);
    out->completions_late = atomic_load_explicit (&self->completions_late, memory_order_relaxed);
    out->tickets_abandoned = atomic_load_explicit (&self->tickets_abandoned, memory_order_acquire);
    uint64_t ended = out->completed + out->failed + out->tickets_abandoned;
    out->in_flight = out->dequeued > ended ? out->dequeued - ended : 0;
    /* coalesced is read after the rest: a message replaced and not yet
       counted shows as backlog for a moment, never below zero. */
    uint64_t coalesced = self->pool ? atomic_load_explicit (&self->coalesced, memory_order_acquire)
                                    : 0;
    uint64_t gone = out->dequeued + out->evicted + coalesced;
    out->backlog = out->enqueued > gone ? out->enqueued - gone : 0;
    if (out->backlog > out->backlog_max) {
        /* Seen before the enqueuer noted it: record it, so the maximum
           never goes down from one snapshot to the next. */
        fh_cons_raise_max (&self->backlog_max, out->backlog);
        out->backlog_max = out->backlog;
    }
    out->capacity = fh_queue_capacity (self->queue);
    out->queue_bytes = atomic_load_explicit (&self->held_bytes, memory_order_relaxed);
    out->stuck = atomic_load_explicit (&self->stuck_workers, memory_order_relaxed);
    out->workers = self->worker_count;
    s_report_counts (self, out);
    /* The tallies, by the registry's rows (consumer_counts.h). */
    fh_metrics_counts_add (out, &self->tally, false);
    for (size_t i = 0; i < self->worker_count; i++)
        fh_metrics_counts_add (out, &self->workers[i].tally, false);
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
        atomic_fetch_add_explicit (&self->tickets_expired, expired, memory_order_relaxed);
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
