/*  hub - one running fanhub. See hub.h. */
#include "hub.h"

#include "clock.h"
#include "lineage.h"
#include "log.h"
#include "trigger.h"

#include <assert.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A configuration and the things made from it: the hub's current one,
   and every consumer instance (a plugin may keep pointers into its
   options). Freed when the last is gone, unless the caller owns it. */
typedef struct {
    fh_config_t *config;
    size_t refs;
    bool owned;
} s_config_ref_t;

struct fh_hub {
    const fh_config_t *config;
    s_config_ref_t *config_ref;
    /* One lineage per configured consumer, in configuration order, and
       their current instances (the enqueuer's table). */
    fh_lineage_t **lines;
    fh_consumer_t **consumers;
    size_t consumer_count;
    /* Consumers removed by a reload, still finishing; and what the
       removed ones that finished had handled. */
    fh_lineage_t **gone;
    size_t gone_count;
    uint64_t gone_handled;
    fh_histogram_snapshot_t *gone_end_to_end, *scratch;
    fh_trigger_t *trigger;
    fh_enqueuer_t *enqueuer;
    fh_source_amqp_t *amqp; /* bus.amqp, or NULL */
    int64_t started_ns;
    bool started;
    bool stopped;
    char *plugin_dir;
    /* The main thread's: handled at the last tick, and at the last trim. */
    uint64_t tick_handled, trimmed_handled;
    /* Other threads read the lineages and the configuration under this
       lock; a reload or a lifecycle step changes them under it. */
    pthread_mutex_t lock;
    uint64_t generation;
    uint64_t reload_attempts;             /* under lock: reloads tried so far */
    atomic_uint_fast64_t control_denied;  /* control_curve handshakes refused */
    atomic_uint_fast64_t control_refused; /* control connections shed */
    uint64_t reloads_started;             /* under lock: ... and started */
    char reload_result[512];              /* under lock: "OK ..." or "ERROR ..." */
    char loading[512];                    /* under lock: the plugin a reload loads now */
};

static s_config_ref_t *
s_config_ref_new (const fh_config_t *config, bool owned)
{
    s_config_ref_t *ref = calloc (1, sizeof *ref);
    if (ref) {
        ref->config = (fh_config_t *) config;
        ref->owned = owned;
        ref->refs = 1;
    }
    return ref;
}

static void
s_config_ref_release (fh_lineage_tag_t tag)
{
    s_config_ref_t *ref = tag;
    if (!ref || --ref->refs)
        return;
    if (ref->owned)
        fh_config_destroy (&ref->config);
    free (ref);
}

static fh_lineage_tag_t
s_config_ref_take (s_config_ref_t *ref)
{
    ref->refs++;
    return ref;
}

/* A consumer's patterns; none means every message. */
static int
s_trigger_add (fh_trigger_t *trigger, size_t index, const fh_consumer_config_t *consumer)
{
    int rc = 0;
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
    self->config_ref = s_config_ref_new (config, false);
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
        fh_consumer_t *instance = fh_consumer_new (consumer, i, plugin_dir, err, errlen);
        if (!instance) {
            fh_hub_destroy (&self);
            return NULL;
        }
        fh_consumer_set_ticket_grace (instance, config->shutdown_timeout_ms * 1000000);
        self->lines[i] = fh_lineage_new (instance, config, s_config_ref_take (self->config_ref),
                                         s_config_ref_release);
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
        if (s_trigger_add (self->trigger, i, consumer) != 0) {
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
    free (self->gone);
    free (self->lines);
    free (self->consumers);
    fh_msg_cache_drain (); /* every message is gone now */
    fh_trigger_destroy (&self->trigger);
    s_config_ref_release (self->config_ref);
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
    for (size_t i = 0; i < self->consumer_count; i++)
        if (fh_lineage_start (self->lines[i], err, errlen) != 0)
            return -1;
    self->started = true;
    self->enqueuer = fh_enqueuer_new (self->config, self->trigger, self->consumers,
                                      self->consumer_count, err, errlen);
    if (self->enqueuer && self->config->amqp)
        self->amqp = fh_source_amqp_new (self->config->amqp,
                                         fh_enqueuer_inject_endpoint (self->enqueuer),
                                         s_consumer_count, self, err, errlen);
    return self->enqueuer && (self->amqp || !self->config->amqp) ? 0 : -1;
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
    self->reload_attempts++;
    pthread_mutex_unlock (&self->lock);
}

uint64_t
fh_hub_reload_result (fh_hub_t *self, char *result, size_t size)
{
    if (result)
        snprintf (result, size, "%s", self->reload_result);
    return self->reload_attempts;
}

/* What a reload is loading (its plugin's init may take long), for
   fh_hub_loading. */
static void
s_note_loading (fh_hub_t *self, const fh_consumer_config_t *consumer)
{
    pthread_mutex_lock (&self->lock);
    if (consumer)
        snprintf (self->loading, sizeof self->loading, "consumer '%s', plugin %s", consumer->name,
                  consumer->plugin);
    else
        self->loading[0] = '\0';
    pthread_mutex_unlock (&self->lock);
}

void
fh_hub_loading (fh_hub_t *self, char *what, size_t size)
{
    pthread_mutex_lock (&self->lock);
    snprintf (what, size, "%s", self->loading);
    pthread_mutex_unlock (&self->lock);
}

/* A reload in the making: the new table, matched by name against the
   running one. */
typedef struct {
    fh_config_t *config;
    s_config_ref_t *ref;
    size_t count;
    fh_consumer_t **consumers; /* the new table's instances */
    fh_lineage_t **lines;      /* new consumers' lineages (others: at commit) */
    size_t *was;               /* index in the old table, or SIZE_MAX */
    bool *fresh;               /* instance made by this reload */
    bool *kept;                /* by old index: not removed */
    fh_trigger_t *trigger;
} s_reload_t;

static void
s_reload_free (s_reload_t *r)
{
    free (r->consumers);
    free (r->lines);
    free (r->was);
    free (r->fresh);
    free (r->kept);
    fh_trigger_destroy (&r->trigger);
}

/* Matches each configured consumer by name: the same settings keep the
   running instance; others get a new instance (a new lineage when the
   name is new), made here: plugin loaded, init called. -1 with err. */
static int
s_reload_make (fh_hub_t *self, s_reload_t *r, char *err, size_t errlen)
{
    const fh_config_t *old = self->config;
    for (size_t i = 0; i < r->count; i++) {
        const fh_consumer_config_t *want = &r->config->consumers[i];
        r->was[i] = SIZE_MAX;
        for (size_t j = 0; j < self->consumer_count; j++)
            if (strcmp (fh_lineage_name (self->lines[j]), want->name) == 0)
                r->was[i] = j;
        if (r->was[i] != SIZE_MAX && fh_config_consumer_same (&old->consumers[r->was[i]], want)) {
            r->consumers[i] = self->consumers[r->was[i]];
            r->kept[r->was[i]] = true;
        }
        else {
            s_note_loading (self, want);
            r->consumers[i] = fh_consumer_new (want, i, self->plugin_dir, err, errlen);
            s_note_loading (self, NULL);
            if (!r->consumers[i])
                return -1;
            fh_consumer_set_ticket_grace (r->consumers[i],
                                          r->config->shutdown_timeout_ms * 1000000);
            r->fresh[i] = true;
            /* A replacement opens its state (the spool its predecessor
               holds) when it starts, after the predecessor is gone. */
            if (r->was[i] != SIZE_MAX)
                r->kept[r->was[i]] = true; /* replaced at commit, not removed */
        }
        if (s_trigger_add (r->trigger, i, want) != 0) {
            snprintf (err, errlen, "out of memory");
            return -1;
        }
    }
    /* The lineages of new consumers, before the enqueuer sees them. */
    for (size_t i = 0; i < r->count; i++)
        if (r->fresh[i] && r->was[i] == SIZE_MAX) {
            r->lines[i] = fh_lineage_new (r->consumers[i], r->config, s_config_ref_take (r->ref),
                                          s_config_ref_release);
            r->consumers[i] = NULL; /* the lineage has it (or destroyed it) */
            if (!r->lines[i]) {
                snprintf (err, errlen, "out of memory");
                return -1;
            }
            r->consumers[i] = fh_lineage_current (r->lines[i]);
            if (fh_lineage_start (r->lines[i], err, errlen) != 0)
                return -1;
        }
    return 0;
}

/* A reload that failed: what it made goes, the running hub is as it was. */
static void
s_reload_undo (s_reload_t *r)
{
    for (size_t i = 0; i < r->count; i++)
        if (r->lines && r->lines[i]) {
            fh_lineage_close (r->lines[i]);
            fh_lineage_destroy (&r->lines[i]);
        }
        else if (r->fresh && r->fresh[i] && r->consumers[i]) {
            fh_consumer_close (r->consumers[i]);
            fh_consumer_destroy (&r->consumers[i]);
        }
    s_reload_free (r);
    if (r->ref)
        s_config_ref_release (r->ref);
    else
        fh_config_destroy (&r->config);
}

/* The enqueuer routes by the new table now: the lineages follow, under
   the lock, so that readers see them and the configuration change
   together. Removed consumers go to the gone list (they finish what they
   hold), replaced ones get their new instance appended. */
static void
s_reload_commit (fh_hub_t *self, s_reload_t *r)
{
    pthread_mutex_lock (&self->lock);
    fh_lineage_t **gone
        = realloc (self->gone, (self->gone_count + self->consumer_count + 1) * sizeof *gone);
    assert (gone); /* a few pointers: treated as fatal */
    self->gone = gone;
    for (size_t j = 0; j < self->consumer_count; j++)
        if (!r->kept[j]) {
            fh_info ("consumer '%s': removed by the reload; it finishes its queue",
                     fh_lineage_name (self->lines[j]));
            fh_lineage_remove (self->lines[j]);
            self->gone[self->gone_count++] = self->lines[j];
        }
    for (size_t i = 0; i < r->count; i++) {
        if (r->was[i] == SIZE_MAX) {
            fh_info ("consumer '%s': added by the reload", fh_lineage_name (r->lines[i]));
            continue;
        }
        r->lines[i] = self->lines[r->was[i]];
        if (r->fresh[i]) {
            fh_info ("consumer '%s': changed by the reload; the new instance starts once the "
                     "old one has consumed what it holds",
                     fh_lineage_name (r->lines[i]));
            int replaced = fh_lineage_replace (r->lines[i], r->consumers[i], r->config,
                                               s_config_ref_take (r->ref));
            assert (replaced == 0); /* a few pointers: treated as fatal */
            (void) replaced;
        }
        else /* kept: its live settings follow the file */
            fh_consumer_set_warn_at (r->consumers[i], r->config->consumers[i].warn_at);
        fh_consumer_set_index (r->consumers[i], i);
    }
    free (self->lines);
    self->lines = r->lines;
    r->lines = NULL;
    free (self->consumers);
    self->consumers = r->consumers;
    r->consumers = NULL;
    self->consumer_count = r->count;
    fh_trigger_destroy (&self->trigger);
    self->trigger = r->trigger;
    r->trigger = NULL;
    s_config_ref_release (self->config_ref);
    self->config_ref = r->ref;
    self->config = r->config;
    self->generation++;
    pthread_mutex_unlock (&self->lock);
    s_reload_free (r);
}

int
fh_hub_reload (fh_hub_t *self, fh_config_t *config, char *err, size_t errlen)
{
    /* Every key that differs is applied below, or it needs a restart. */
    char keys[512];
    if (fh_config_restart_keys (self->config, config, keys, sizeof keys) > 0) {
        snprintf (err, errlen, "%s need%s a restart", keys, strchr (keys, ',') ? "" : "s");
        fh_config_destroy (&config);
        return -1;
    }
    s_reload_t r = {.config = config, .count = config->consumer_count};
    r.ref = s_config_ref_new (config, true);
    r.consumers = calloc (r.count, sizeof *r.consumers);
    r.lines = calloc (r.count, sizeof *r.lines);
    r.was = calloc (r.count, sizeof *r.was);
    r.fresh = calloc (r.count, sizeof *r.fresh);
    r.kept = calloc (self->consumer_count + 1, sizeof *r.kept);
    r.trigger = fh_trigger_new (r.count);
    int rc = r.ref && r.consumers && r.lines && r.was && r.fresh && r.kept && r.trigger ? 0 : -1;
    if (rc != 0)
        snprintf (err, errlen, "out of memory");
    if (rc == 0)
        rc = s_reload_make (self, &r, err, errlen);
    if (rc == 0) {
        fh_trigger_seal (r.trigger);
        /* The signature files are read again (a new CRL); if they no
           longer load, the reload is refused before anything changed. */
        if (self->enqueuer)
            rc = fh_enqueuer_reload_signatures (self->enqueuer, config, err, errlen);
        if (rc == 0 && self->enqueuer)
            rc = fh_enqueuer_swap (self->enqueuer, r.trigger, r.consumers, r.count, err, errlen);
    }
    if (rc != 0) {
        s_reload_undo (&r);
        return -1;
    }
    s_reload_commit (self, &r);
    return 0;
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
    char reasons[256] = "";
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
