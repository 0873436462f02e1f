/*  consumer - one configured consumer's life. See consumer.h;
    consumer_internal.h says how the files share the work.

    This file: creating and destroying a consumer (its plugin loaded and
    its init called with the host table it is handed), starting its
    threads, and what the hub does to it meanwhile: close, retire, pause
    and resume, abandon, a new index or clock, the tick; the accessors.
    What its plugin says and asks is consumer_plugin.c's, what the control
    actor reads of it consumer_figures.c's.
*/
#include "consumer_internal.h"

#include "crash.h"
#include "option_table.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_release_unhandled (fh_msg_t *msg, void *arg);

int
fh_consumer_fits_plugin (const fanhub_host_t *host, const fh_consumer_config_t *config,
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
    /* Options of the wrong form are refused here, before init or check
       runs: a plugin with a table never sees them. */
    const fanhub_opt_t *table = fh_option_table_of (desc);
    char why[1024];
    if (table
        && fh_option_table_check (host, desc->name, table, config->options, why, sizeof why) != 0) {
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
    pthread_cond_init (&self->pool_room, &attr);
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
    self->pool_limit = fh_cons_pool_limit (self);
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
s_load_plugin (fh_consumer_t *self, const fanhub_host_t *host, const fh_consumer_config_t *config,
               const char *plugin_dir, char *err, size_t errlen)
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
    if (fh_consumer_fits_plugin (host, config, self->desc, err, errlen) != 0)
        return -1;
    self->crash_site = (fh_crash_site_t){self->name, fh_plugin_path (self->plugin), -1};
    if (self->desc->init) {
        why[0] = '\0';
        fh_crash_enter (&self->crash_site, "init", NULL);
        int rc = self->desc->init (host, self->ctx, config->options, &self->state, why, sizeof why);
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
fh_consumer_new (const fanhub_host_t *host, const fh_consumer_config_t *config, size_t index,
                 const char *plugin_dir, char *err, size_t errlen)
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
        || s_load_plugin (self, host, config, plugin_dir, err, errlen) != 0) {
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
    fh_cons_let_go (arg, msg, FH_GONE_UNHANDLED, NULL, 0);
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
        s_release_unhandled (late.msg, self);
    }
    fh_pending_destroy (&self->pending, s_release_unhandled, self);
    fh_shard_destroy (&self->shard);
    if (self->pool) {
        fh_keyed_destroy (&self->keyed, s_release_unhandled, self);
        fh_order_key_destroy (&self->order_key);
        pthread_mutex_destroy (&self->pool_lock);
        pthread_cond_destroy (&self->pool_work);
        pthread_cond_destroy (&self->pool_room);
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
            fh_cons_let_go_copy (self, deferral, FH_GONE_UNHANDLED, NULL);
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
