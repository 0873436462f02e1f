/*  hub - one running fanhub. See hub.h. */
#include "hub_internal.h"

#include "clock.h"
#include "host.h"
#include "lineage.h"
#include "log.h"
#include "publish.h"
#include "trigger.h"

#include <assert.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fh_hub_ref_t *
fh_hub_ref_new (const fh_config_t *config, bool owned)
{
    fh_hub_ref_t *ref = calloc (1, sizeof *ref);
    if (ref) {
        ref->config = (fh_config_t *) config;
        ref->owned = owned;
        ref->refs = 1;
    }
    return ref;
}

void
fh_hub_ref_release (fh_lineage_tag_t tag)
{
    fh_hub_ref_t *ref = tag;
    if (!ref || --ref->refs)
        return;
    if (ref->owned)
        fh_config_destroy (&ref->config);
    free (ref);
}

fh_lineage_tag_t
fh_hub_ref_take (fh_hub_ref_t *ref)
{
    ref->refs++;
    return ref;
}

/* A consumer's patterns; none means every message (but for a
   fedora_messaging consumer: none at all). */
int
fh_hub_trigger_add (fh_trigger_t *trigger, size_t index, const fh_consumer_config_t *consumer)
{
    int rc = 0;
    if (consumer->fedora_messaging)
        return 0; /* only what its own AMQP source targets at it */
    if (consumer->topics.count == 0)
        rc = fh_trigger_add (trigger, index, "");
    for (size_t t = 0; t < consumer->topics.count && rc == 0; t++)
        rc = fh_trigger_add (trigger, index, consumer->topics.items[t]);
    return rc;
}

fh_hub_t *
fh_hub_new (const fh_config_t *config, const char *plugin_dir, char *err, size_t errlen)
{
    fh_hub_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    self->config = config;
    self->started_ns = fh_clock_mono_ns ();
    pthread_mutex_init (&self->lock, NULL);
    self->plugin_dir = strdup (plugin_dir);
    self->config_ref = fh_hub_ref_new (config, false);
    self->lines = calloc (config->consumer_count, sizeof *self->lines);
    self->consumers = calloc (config->consumer_count, sizeof *self->consumers);
    self->gone_end_to_end = calloc (1, sizeof *self->gone_end_to_end);
    self->scratch = malloc (sizeof *self->scratch);
    self->trigger = fh_trigger_new (config->consumer_count);
    if (!self->plugin_dir || !self->config_ref || !self->lines || !self->consumers
        || !self->gone_end_to_end || !self->scratch || !self->trigger) {
        snprintf (err, errlen, "out of memory");
        fh_hub_destroy (&self);
        return NULL;
    }
    fh_consumer_set_memory_max (config->memory_max_bytes);
    for (size_t i = 0; i < config->consumer_count; i++) {
        const fh_consumer_config_t *consumer = &config->consumers[i];
        if (fh_consumer_stopping ()) { /* a stop came during an init (cmd_run.c) */
            snprintf (err, errlen, "the start was stopped before consumer '%s' started",
                      consumer->name);
            fh_hub_destroy (&self);
            return NULL;
        }
        fh_consumer_t *instance = fh_consumer_new (&fh_host, consumer, i, plugin_dir, err, errlen);
        if (!instance) {
            fh_hub_destroy (&self);
            return NULL;
        }
        fh_consumer_set_ticket_grace (instance, config->shutdown_timeout_ms * 1000000);
        self->lines[i] = fh_lineage_new (instance, config, fh_hub_ref_take (self->config_ref),
                                         fh_hub_ref_release);
        if (!self->lines[i]) {
            snprintf (err, errlen, "out of memory");
            fh_hub_destroy (&self);
            return NULL;
        }
        self->consumer_count = i + 1;
        if (fh_lineage_open_state (self->lines[i], err, errlen) != 0) {
            fh_hub_destroy (&self);
            return NULL;
        }
        self->consumers[i] = instance;
        if (fh_hub_trigger_add (self->trigger, i, consumer) != 0) {
            snprintf (err, errlen, "out of memory");
            fh_hub_destroy (&self);
            return NULL;
        }
    }
    fh_trigger_seal (self->trigger);
    return self;
}

void
fh_hub_destroy (fh_hub_t **self_p)
{
    fh_hub_t *self = *self_p;
    if (!self)
        return;
    fh_hub_stop_receiving (self);
    fh_enqueuer_destroy (&self->enqueuer);
    for (size_t i = 0; i < self->consumer_count; i++)
        fh_lineage_destroy (&self->lines[i]);
    for (size_t i = 0; i < self->gone_count; i++)
        fh_lineage_destroy (&self->gone[i]);
    /* After every message: their waiters tell the source until then. */
    fh_source_amqp_destroy (&self->amqp);
    for (size_t i = 0; i < self->fedora_count; i++)
        fh_source_amqp_destroy (&self->fedora[i]);
    free (self->fedora);
    free (self->gone);
    free (self->lines);
    free (self->consumers);
    fh_msg_cache_drain (); /* every message is gone now */
    fh_trigger_destroy (&self->trigger);
    fh_hub_ref_release (self->config_ref);
    free (self->gone_end_to_end);
    free (self->scratch);
    free (self->plugin_dir);
    pthread_mutex_destroy (&self->lock);
    free (self);
    *self_p = NULL;
}

/* An emit waiter's size for bus.amqp's deliveries (a reload changes it). */
static size_t
s_consumer_count (void *arg)
{
    fh_hub_t *self = arg;
    pthread_mutex_lock (&self->lock);
    size_t count = self->consumer_count;
    pthread_mutex_unlock (&self->lock);
    return count;
}

/* Whether the consumer of that name is halted now, or gone (a reload
   removed it): its fedora_messaging source stops consuming meanwhile. */
static bool
s_consumer_halted (void *arg, const char *name)
{
    fh_hub_t *self = arg;
    bool halted = true;
    pthread_mutex_lock (&self->lock);
    for (size_t i = 0; i < self->consumer_count; i++) {
        fh_consumer_t *current = self->lines[i] ? fh_lineage_current (self->lines[i]) : NULL;
        if (current && strcmp (fh_lineage_name (self->lines[i]), name) == 0)
            halted = fh_consumer_plugin_state (current) == FANHUB_STATE_HALTED;
    }
    pthread_mutex_unlock (&self->lock);
    return halted;
}

/* One AMQP source for each fedora_messaging consumer, its deliveries
   targeted at it alone (source_amqp.h). -1 with err. */
static int
s_start_fedora (fh_hub_t *self, const char *inject, char *err, size_t errlen)
{
    const fh_config_t *config = self->config;
    self->fedora = calloc (config->consumer_count, sizeof *self->fedora);
    if (!self->fedora) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    self->fedora_count = config->consumer_count;
    for (size_t i = 0; i < config->consumer_count; i++) {
        const fh_consumer_config_t *consumer = &config->consumers[i];
        if (consumer->fedora_messaging
            && !(self->fedora[i] = fh_source_amqp_new_fedora (
                     consumer->fedora_messaging, consumer->name, inject, s_consumer_count,
                     s_consumer_halted, self, err, errlen)))
            return -1;
    }
    return 0;
}

/* While busy, freed memory stays with the allocator. By default glibc
   hands the top of a heap back to the kernel as soon as 128 KiB of it is
   free, so a 64 KiB body freed at the top and the next one received fault
   the same pages in again, every message: with the threshold raised, a
   hub with one consumer of 64 KiB messages took 14 k/s at 50 us of CPU
   each instead of 6.5 k/s at 136 us (docs/performance.md). What is kept
   goes back at rest: s_give_back_memory trims at the first idle tick. */
#define S_TRIM_THRESHOLD (256 * 1024 * 1024)

static void
s_keep_memory_while_busy (void)
{
#ifdef __GLIBC__
    mallopt (M_TRIM_THRESHOLD, S_TRIM_THRESHOLD);
#endif
}

int
fh_hub_start (fh_hub_t *self, char *err, size_t errlen)
{
    s_keep_memory_while_busy ();
    /* Consumers first: the enqueuer may hand them messages at once. */
    for (size_t i = 0; i < self->consumer_count; i++) {
        if (fh_consumer_stopping ()) { /* a stop came during an init (cmd_run.c) */
            snprintf (err, errlen, "the start was stopped before consumer '%s' started",
                      self->config->consumers[i].name);
            return -1;
        }
        if (fh_lineage_start (self->lines[i], err, errlen) != 0)
            return -1;
    }
    self->started = true;
    self->enqueuer = fh_enqueuer_new (self->config, self->trigger, self->consumers,
                                      self->consumer_count, err, errlen);
    /* publish: {local: true} hands messages to the consumers through it. */
    if (self->enqueuer)
        fh_publisher_set_local (fh_enqueuer_inject_endpoint (self->enqueuer));
    if (self->enqueuer && self->config->amqp)
        self->amqp = fh_source_amqp_new (self->config->amqp,
                                         fh_enqueuer_inject_endpoint (self->enqueuer),
                                         s_consumer_count, self, err, errlen);
    if (!self->enqueuer || (self->config->amqp && !self->amqp))
        return -1;
    return s_start_fedora (self, fh_enqueuer_inject_endpoint (self->enqueuer), err, errlen);
}

void
fh_hub_stop_receiving (fh_hub_t *self)
{
    if (self->stopped)
        return;
    self->stopped = true;
    /* The source first: what it has not acked is the broker's again. */
    if (self->amqp)
        fh_source_amqp_stop (self->amqp);
    for (size_t i = 0; i < self->fedora_count; i++)
        if (self->fedora[i])
            fh_source_amqp_stop (self->fedora[i]);
    fh_publisher_set_local (NULL); /* local: true injects no more */
    if (self->enqueuer)
        fh_enqueuer_stop (self->enqueuer);
    pthread_mutex_lock (&self->lock); /* the control actor reads the stages */
    for (size_t i = 0; i < self->consumer_count; i++)
        if (self->lines[i])
            fh_lineage_close (self->lines[i]);
    pthread_mutex_unlock (&self->lock);
}

bool
fh_hub_drained (fh_hub_t *self)
{
    for (size_t i = 0; i < self->consumer_count; i++)
        if (!fh_lineage_ended (self->lines[i]))
            return false;
    for (size_t i = 0; i < self->gone_count; i++)
        if (!fh_lineage_ended (self->gone[i]))
            return false;
    return true;
}

void
fh_hub_abandon (fh_hub_t *self, const char *why)
{
    for (size_t i = 0; i < self->consumer_count; i++)
        fh_lineage_abandon (self->lines[i], why);
    for (size_t i = 0; i < self->gone_count; i++)
        fh_lineage_abandon (self->gone[i], why);
}

void
fh_hub_lock (fh_hub_t *self)
{
    pthread_mutex_lock (&self->lock);
}

void
fh_hub_unlock (fh_hub_t *self)
{
    pthread_mutex_unlock (&self->lock);
}

uint64_t
fh_hub_generation (fh_hub_t *self)
{
    return self->generation;
}

void
fh_hub_note_reload_start (fh_hub_t *self)
{
    pthread_mutex_lock (&self->lock);
    self->reloads_started++;
    pthread_mutex_unlock (&self->lock);
}

uint64_t
fh_hub_reloads_started (fh_hub_t *self)
{
    return self->reloads_started;
}

void
fh_hub_note_reload (fh_hub_t *self, const char *result)
{
    pthread_mutex_lock (&self->lock);
    snprintf (self->reload_result, sizeof self->reload_result, "%s", result);
    self->reload_wall_ns = fh_clock_mono_ns () + fh_clock_wall_offset_ns ();
    self->reload_attempts++;
    pthread_mutex_unlock (&self->lock);
}

double
fh_hub_reload_time (fh_hub_t *self)
{
    return (double) self->reload_wall_ns / 1e9;
}

uint64_t
fh_hub_reload_result (fh_hub_t *self, char *result, size_t size)
{
    if (result)
        snprintf (result, size, "%s", self->reload_result);
    return self->reload_attempts;
}

/* After instances are gone: their queues, messages and plugin state were
   freed by several threads into several malloc arenas, where the free
   pages stay resident; over many reloads that reads as growth. Trimming
   hands them back (glibc; measured in docs/control-plane.md). */
static void
s_give_back_memory (void)
{
#ifdef __GLIBC__
    malloc_trim (0);
#endif
}

static size_t
s_instances (fh_hub_t *self)
{
    size_t count = 0;
    for (size_t i = 0; i < self->consumer_count; i++)
        count += fh_lineage_instances (self->lines[i]);
    for (size_t i = 0; i < self->gone_count; i++)
        count += fh_lineage_instances (self->gone[i]);
    return count;
}

static size_t
s_step (fh_hub_t *self)
{
    size_t leaving = 0;
    for (size_t i = 0; i < self->consumer_count; i++) {
        size_t alive = fh_lineage_step (self->lines[i], &self->lock);
        leaving += alive > 1 ? alive - 1 : 0; /* beyond the current instance */
    }
    /* Removed consumers: step each (it locks for what readers see), then
       drop the finished ones from the list in one go under the lock, the
       hub keeping what they handled so its total never goes back. */
    size_t finished = 0;
    for (size_t i = 0; i < self->gone_count; i++) {
        size_t alive = fh_lineage_step (self->gone[i], &self->lock);
        leaving += alive;
        finished += alive == 0;
    }
    if (!finished)
        return leaving;
    fh_lineage_t **done = calloc (finished, sizeof *done);
    if (!done)
        return leaving; /* out of memory: try again at the next step */
    size_t left = 0, count = 0;
    pthread_mutex_lock (&self->lock);
    for (size_t i = 0; i < self->gone_count; i++) {
        if (fh_lineage_instances (self->gone[i]) > 0) {
            self->gone[left++] = self->gone[i];
            continue;
        }
        self->gone_handled += fh_lineage_handled (self->gone[i], self->scratch);
        fh_histogram_add (self->gone_end_to_end, self->scratch);
        done[count++] = self->gone[i];
    }
    self->gone_count = left;
    pthread_mutex_unlock (&self->lock);
    for (size_t i = 0; i < count; i++)
        fh_lineage_destroy (&done[i]);
    free (done);
    return leaving;
}

void
fh_hub_finish (fh_hub_t *self)
{
    for (size_t i = 0; i < self->consumer_count; i++)
        fh_lineage_finish (self->lines[i]);
}

size_t
fh_hub_instances (fh_hub_t *self)
{
    return s_instances (self);
}

size_t
fh_hub_step (fh_hub_t *self)
{
    size_t before = s_instances (self);
    size_t leaving = s_step (self);
    if (s_instances (self) < before)
        s_give_back_memory ();
    return leaving;
}

size_t
fh_hub_consumer_count (const fh_hub_t *self)
{
    return self->consumer_count;
}

fh_consumer_t *
fh_hub_consumer (fh_hub_t *self, size_t index)
{
    return index < self->consumer_count ? self->consumers[index] : NULL;
}

void
fh_hub_consumer_counts (fh_hub_t *self, size_t index, fh_consumer_counts_t *out)
{
    fh_lineage_counts (self->lines[index], out);
}

uint64_t
fh_hub_consumer_serial (fh_hub_t *self, size_t index)
{
    return fh_lineage_serial (self->lines[index]);
}

void
fh_hub_consumer_latency (fh_hub_t *self, size_t index, fh_histogram_snapshot_t *queue_wait,
                         fh_histogram_snapshot_t *processing)
{
    fh_lineage_latency (self->lines[index], queue_wait, processing);
}

static void
s_tick_one (fh_consumer_t *consumer, int64_t now_ns)
{
    fh_consumer_check_stuck (consumer, now_ns);
    fh_consumer_tick (consumer, now_ns);
}

void
fh_hub_tick (fh_hub_t *self, int64_t now_ns)
{
    for (size_t i = 0; i < self->consumer_count; i++)
        fh_lineage_each_started (self->lines[i], s_tick_one, now_ns);
    for (size_t i = 0; i < self->gone_count; i++)
        fh_lineage_each_started (self->gone[i], s_tick_one, now_ns);
    /* A backlog's messages were freed by consumer threads into their
       malloc arenas, which keep the pages: once the hub has handled
       nothing for a tick, after handling something, they go back. */
    pthread_mutex_lock (&self->lock);
    uint64_t handled = fh_hub_handled (self, NULL);
    pthread_mutex_unlock (&self->lock);
    if (handled == self->tick_handled && handled != self->trimmed_handled) {
        s_give_back_memory ();
        self->trimmed_handled = handled;
    }
    self->tick_handled = handled;
}

void
fh_hub_counts (fh_hub_t *self, fh_enqueuer_counts_t *out)
{
    if (self->enqueuer)
        fh_enqueuer_counts (self->enqueuer, out);
    else
        memset (out, 0, sizeof *out);
    out->auth_denied += atomic_load (&self->control_denied);
    out->control_refused = atomic_load (&self->control_refused);
    out->control_unanswered = atomic_load (&self->control_unanswered);
}

atomic_uint_fast64_t *
fh_hub_control_denied (fh_hub_t *self)
{
    return &self->control_denied;
}

atomic_uint_fast64_t *
fh_hub_control_refused (fh_hub_t *self)
{
    return &self->control_refused;
}

atomic_uint_fast64_t *
fh_hub_control_unanswered (fh_hub_t *self)
{
    return &self->control_unanswered;
}

uint64_t
fh_hub_handled (fh_hub_t *self, fh_histogram_snapshot_t *end_to_end)
{
    uint64_t handled = self->gone_handled;
    if (end_to_end)
        *end_to_end = *self->gone_end_to_end;
    if (self->enqueuer) {
        handled += fh_enqueuer_handled (self->enqueuer, self->scratch);
        if (end_to_end)
            fh_histogram_add (end_to_end, self->scratch);
    }
    for (size_t k = 0; k < 2; k++) {
        fh_lineage_t **list = k == 0 ? self->lines : self->gone;
        size_t count = k == 0 ? self->consumer_count : self->gone_count;
        for (size_t i = 0; i < count; i++) {
            handled += fh_lineage_handled (list[i], end_to_end ? self->scratch : NULL);
            if (end_to_end)
                fh_histogram_add (end_to_end, self->scratch);
        }
    }
    return handled;
}

void
fh_hub_draining (fh_hub_t *self, uint64_t *instances, uint64_t *backlog)
{
    *instances = *backlog = 0;
    for (size_t i = 0; i < self->consumer_count; i++)
        *instances += fh_lineage_draining (self->lines[i], backlog);
    for (size_t i = 0; i < self->gone_count; i++)
        *instances += fh_lineage_draining (self->gone[i], backlog);
}

bool
fh_hub_amqp_counts (fh_hub_t *self, fh_source_amqp_counts_t *out)
{
    memset (out, 0, sizeof *out);
    if (!self->amqp)
        return false;
    fh_source_amqp_counts (self->amqp, out);
    return true;
}

const char *
fh_hub_inject_endpoint (fh_hub_t *self)
{
    return fh_enqueuer_inject_endpoint (self->enqueuer);
}

const fh_config_t *
fh_hub_config (const fh_hub_t *self)
{
    return self->config;
}

int64_t
fh_hub_started_ns (const fh_hub_t *self)
{
    return self->started_ns;
}

int
fh_hub_endpoint_peers (fh_hub_t *self, size_t index)
{
    return self->enqueuer ? fh_enqueuer_endpoint_peers (self->enqueuer, index) : 0;
}

int64_t
fh_hub_enqueuer_age_ns (fh_hub_t *self)
{
    return self->enqueuer ? fh_clock_mono_ns () - fh_enqueuer_beat_ns (self->enqueuer) : 0;
}

void
fh_hub_endpoint_status (fh_hub_t *self, size_t index, fh_endpoint_status_t *out)
{
    memset (out, 0, sizeof *out);
    if (self->enqueuer)
        fh_enqueuer_endpoint_status (self->enqueuer, index, out);
}

/* bus.validate_signatures at stop: what it refused (or let through), by
   reason, so no drop goes unsaid. */
static void
s_log_signatures (const fh_enqueuer_counts_t *hub)
{
    char reasons[512] = "";
    size_t used = 0;
    uint64_t failed = 0;
    for (int i = FH_SIG_MISSING_FIELDS; i < FH_SIG_REASONS && used < sizeof reasons; i++) {
        failed += hub->signature_failed[i];
        if (hub->signature_failed[i])
            used += (size_t) snprintf (reasons + used, sizeof reasons - used, "%s%s %llu",
                                       used ? ", " : " (", fh_sig_reason_name (i),
                                       (unsigned long long) hub->signature_failed[i]);
    }
    if (used && used < sizeof reasons - 1)
        strcat (reasons, ")");
    fh_info ("hub: signatures checked %llu, failed %llu%s",
             (unsigned long long) hub->signatures_checked, (unsigned long long) failed, reasons);
}

void
fh_hub_log_counts (fh_hub_t *self)
{
    fh_enqueuer_counts_t hub;
    fh_hub_counts (self, &hub);
    char reasons[256] = "";
    size_t used = 0;
    for (int i = 0; i < FH_MALFORMED_REASONS && used < sizeof reasons; i++)
        if (hub.malformed_by_reason[i])
            used += (size_t) snprintf (reasons + used, sizeof reasons - used, "%s%s %llu",
                                       used ? ", " : " (", fh_malformed_reason_name (i),
                                       (unsigned long long) hub.malformed_by_reason[i]);
    if (used && used < sizeof reasons - 1)
        strcat (reasons, ")");
    fh_info ("hub: received %llu, malformed %llu%s, unrouted %llu",
             (unsigned long long) hub.received, (unsigned long long) hub.malformed, reasons,
             (unsigned long long) hub.unrouted);
    if (hub.signatures)
        s_log_signatures (&hub);
    for (size_t i = 0; i < self->consumer_count; i++) {
        fh_consumer_counts_t c;
        fh_lineage_counts (self->lines[i], &c);
        fh_log (c.dropped || c.failed ? FANHUB_LOG_WARNING : FANHUB_LOG_INFO,
                "consumer '%s': enqueued %llu, completed %llu, failed %llu, "
                "dropped %llu (queue full), unconsumed %llu",
                fh_lineage_name (self->lines[i]), (unsigned long long) c.enqueued,
                (unsigned long long) c.completed, (unsigned long long) c.failed,
                (unsigned long long) c.dropped, (unsigned long long) c.backlog);
    }
}
