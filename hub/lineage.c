/*  lineage - one named consumer over the hub's life. See lineage.h. */
#include "lineage.h"

#include "clock.h"
#include "host_ctx.h"
#include "log.h"
#include "metrics.h"
#include "thread.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long a teardown may take before the log says so. */
#define TEARDOWN_WARN_NS (5 * INT64_C (1000000000))

typedef struct {
    fh_consumer_t *consumer;
    fh_stage_t stage;
    bool state_open;
    const fh_config_t *config; /* it was made from (its index is into that) */
    fh_lineage_tag_t tag;
} s_instance_t;

/* An instance whose threads ended, being destroyed on a thread of its
   own: its plugin's fini (and its spool's last sync) may take long or
   never return, and the main thread must not wait for it. */
typedef struct {
    fh_consumer_t *consumer;
    fh_lineage_tag_t tag;
    char *plugin; /* for the log, since the consumer goes away */
    fh_thread_t thread;
    atomic_bool done;
    int64_t since_ns;
    bool warned;
} s_leaving_t;

struct fh_lineage {
    char *name;
    s_instance_t *instances; /* oldest first */
    size_t count, room;
    uint64_t serial; /* fh_lineage_serial */
    bool removed;
    bool closed;           /* the newest gets no more: shutdown, or removed */
    bool finishing;        /* shutdown, drained: the last instance goes too */
    s_leaving_t **leaving; /* being torn down, on threads of their own */
    size_t leaving_count;
    void (*release) (fh_lineage_tag_t);
    /* The figures of the instances that are gone. */
    fh_consumer_counts_t gone;
    uint64_t gone_handled;
    fh_histogram_snapshot_t *gone_queue_wait, *gone_processing, *gone_end_to_end;
    fh_histogram_snapshot_t *scratch;
    /* Messages a gone instance left unread in the spool its successor
       takes over: moved from the figures of the gone (enqueued) to the
       successor's when it starts, so that none is counted twice. */
    uint64_t handed_over;
};

fh_lineage_t *
fh_lineage_new (fh_consumer_t *first, const fh_config_t *config, fh_lineage_tag_t tag,
                void (*release) (fh_lineage_tag_t))
{
    static atomic_uint_fast64_t serials;
    fh_lineage_t *self = calloc (1, sizeof *self);
    if (self) {
        self->serial = atomic_fetch_add (&serials, 1) + 1;
        self->name = strdup (fh_consumer_name (first));
        self->instances = calloc (2, sizeof *self->instances);
        self->room = 2;
        self->release = release;
        self->gone_queue_wait = calloc (1, sizeof *self->gone_queue_wait);
        self->gone_processing = calloc (1, sizeof *self->gone_processing);
        self->gone_end_to_end = calloc (1, sizeof *self->gone_end_to_end);
        self->scratch = malloc (sizeof *self->scratch);
    }
    if (!self || !self->name || !self->instances || !self->gone_queue_wait || !self->gone_processing
        || !self->gone_end_to_end || !self->scratch) {
        fh_lineage_destroy (&self);
        fh_consumer_destroy (&first);
        if (release)
            release (tag);
        return NULL;
    }
    self->instances[0] = (s_instance_t){first, FH_STAGE_WAITING, false, config, tag};
    self->count = 1;
    return self;
}

static void
s_destroy_instance (fh_lineage_t *self, s_instance_t *instance)
{
    fh_consumer_destroy (&instance->consumer);
    if (self->release)
        self->release (instance->tag);
}

static void *
s_teardown_thread (void *arg)
{
    s_leaving_t *leaving = arg;
    fh_consumer_destroy (&leaving->consumer);
    atomic_store_explicit (&leaving->done, true, memory_order_release);
    return NULL;
}

/* Joins a finished teardown (or waits for it: only when the hub is
   destroyed, after every teardown was waited for within the deadline). */
static void
s_leaving_join (fh_lineage_t *self, s_leaving_t *leaving)
{
    fh_thread_join (&leaving->thread);
    if (self->release)
        self->release (leaving->tag);
    free (leaving->plugin);
    free (leaving);
}

/* Hands a gone instance to a teardown thread; destroys it here when no
   thread can be had. */
static void
s_leave (fh_lineage_t *self, s_instance_t *instance)
{
    s_leaving_t **list = realloc (self->leaving, (self->leaving_count + 1) * sizeof *list);
    s_leaving_t *leaving = calloc (1, sizeof *leaving);
    if (list)
        self->leaving = list;
    if (leaving && list) {
        leaving->consumer = instance->consumer;
        leaving->tag = instance->tag;
        leaving->plugin = strdup (fh_consumer_plugin_path (instance->consumer));
        leaving->since_ns = fh_clock_mono_ns ();
        atomic_init (&leaving->done, false);
        char err[128]; /* no thread: torn down here instead */
        if (leaving->plugin
            && fh_thread_start (&leaving->thread, "fh:teardown", s_teardown_thread, leaving, err,
                                sizeof err)
                   == 0) {
            self->leaving[self->leaving_count++] = leaving;
            return;
        }
        free (leaving->plugin);
    }
    free (leaving);
    s_destroy_instance (self, instance);
}

/* Main thread: joins the teardowns that finished; says once which one
   takes long (its plugin's fini, most likely). */
static void
s_reap (fh_lineage_t *self)
{
    size_t left = 0;
    int64_t now = fh_clock_mono_ns ();
    for (size_t i = 0; i < self->leaving_count; i++) {
        s_leaving_t *leaving = self->leaving[i];
        if (atomic_load_explicit (&leaving->done, memory_order_acquire)) {
            s_leaving_join (self, leaving);
            continue;
        }
        if (!leaving->warned && now - leaving->since_ns > TEARDOWN_WARN_NS) {
            leaving->warned = true;
            fh_warning ("consumer '%s': an instance that ended is not destroyed after %lld s: "
                        "the fini of plugin %s has not returned; the hub goes on without it",
                        self->name, (long long) (TEARDOWN_WARN_NS / 1000000000), leaving->plugin);
        }
        self->leaving[left++] = leaving;
    }
    self->leaving_count = left;
}

void
fh_lineage_destroy (fh_lineage_t **self_p)
{
    fh_lineage_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; i < self->count; i++)
        s_destroy_instance (self, &self->instances[i]);
    for (size_t i = 0; i < self->leaving_count; i++)
        s_leaving_join (self, self->leaving[i]);
    free (self->leaving);
    free (self->instances);
    free (self->name);
    free (self->gone_queue_wait);
    free (self->gone_processing);
    free (self->gone_end_to_end);
    free (self->scratch);
    free (self);
    *self_p = NULL;
}

const char *
fh_lineage_name (const fh_lineage_t *self)
{
    return self->name;
}

uint64_t
fh_lineage_serial (const fh_lineage_t *self)
{
    return self->serial;
}

fh_consumer_t *
fh_lineage_current (fh_lineage_t *self)
{
    return self->count ? self->instances[self->count - 1].consumer : NULL;
}

size_t
fh_lineage_instances (const fh_lineage_t *self)
{
    return self->count + self->leaving_count;
}

size_t
fh_lineage_draining (fh_lineage_t *self, uint64_t *backlog)
{
    size_t superseded = self->removed ? self->count : self->count ? self->count - 1 : 0;
    for (size_t i = 0; i < superseded; i++) {
        fh_consumer_counts_t c;
        fh_consumer_counts (self->instances[i].consumer, &c);
        *backlog += c.backlog;
    }
    return superseded;
}

int
fh_lineage_open_state (fh_lineage_t *self, char *err, size_t errlen)
{
    s_instance_t *oldest = &self->instances[0];
    if (!self->count || oldest->state_open)
        return 0;
    if (fh_consumer_open_state (oldest->consumer, oldest->config, err, errlen) != 0)
        return -1;
    oldest->state_open = true;
    return 0;
}

int
fh_lineage_start (fh_lineage_t *self, char *err, size_t errlen)
{
    if (!self->count || self->instances[0].stage != FH_STAGE_WAITING)
        return 0;
    s_instance_t *oldest = &self->instances[0];
    if (fh_lineage_open_state (self, err, errlen) != 0
        || fh_consumer_start (oldest->consumer, err, errlen) != 0) {
        /* Nothing of it runs: it is gone, and the next may try. */
        oldest->stage = FH_STAGE_STOPPED;
        return -1;
    }
    /* One that was replaced or closed while it waited drains at once. */
    oldest->stage = self->count > 1 || self->closed ? FH_STAGE_DRAINING : FH_STAGE_RUNNING;
    return 0;
}

fh_consumer_t *
fh_lineage_waiting (fh_lineage_t *self)
{
    s_instance_t *newest = self->count ? &self->instances[self->count - 1] : NULL;
    return newest && newest->stage == FH_STAGE_WAITING && !newest->state_open ? newest->consumer
                                                                              : NULL;
}

static void s_fold (fh_lineage_t *self, fh_consumer_t *consumer);

/* The newest instance never started and its successor holds its messages
   now: its figures stay (what it held counted enqueued once, by the
   successor), it leaves the line, fini on a thread of its own. */
static void
s_fold_waiting (fh_lineage_t *self)
{
    s_instance_t gone = self->instances[--self->count];
    fh_consumer_counts_t c;
    fh_consumer_counts (gone.consumer, &c);
    s_fold (self, gone.consumer);
    self->handed_over -= c.backlog; /* s_fold took it for a spool's */
    self->gone.enqueued -= c.backlog;
    fh_info ("consumer '%s': an instance that never started is replaced; its %llu messages go "
             "to the new one",
             self->name, (unsigned long long) c.backlog);
    s_leave (self, &gone);
}

int
fh_lineage_replace (fh_lineage_t *self, fh_consumer_t *next, const fh_config_t *config,
                    fh_lineage_tag_t tag, bool folded)
{
    if (folded)
        s_fold_waiting (self);
    if (self->count == self->room) {
        s_instance_t *grown = realloc (self->instances, self->room * 2 * sizeof *grown);
        if (!grown)
            return -1;
        self->instances = grown;
        self->room *= 2;
    }
    s_instance_t *newest = self->count ? &self->instances[self->count - 1] : NULL;
    /* A spilling instance leaves its spool to the next (docs/control-plane.md). */
    if (newest && config->state_dir && fh_consumer_overflow (newest->consumer) == FH_OVERFLOW_SPILL)
        fh_consumer_inherit_spool (next, newest->consumer);
    if (newest)
        fh_consumer_retire (newest->consumer);
    if (newest && newest->stage == FH_STAGE_RUNNING)
        newest->stage = FH_STAGE_DRAINING;
    self->instances[self->count++] = (s_instance_t){next, FH_STAGE_WAITING, false, config, tag};
    return 0;
}

void
fh_lineage_remove (fh_lineage_t *self)
{
    self->removed = true;
    fh_lineage_close (self);
}

void
fh_lineage_close (fh_lineage_t *self)
{
    if (!self->count)
        return;
    s_instance_t *newest = &self->instances[self->count - 1];
    self->closed = true;
    /* Replaced ones still draining keep time for their fini too. */
    for (size_t i = 0; i + 1 < self->count; i++)
        fh_consumer_bound_tickets (self->instances[i].consumer);
    fh_consumer_close (newest->consumer);
    if (newest->stage == FH_STAGE_RUNNING)
        newest->stage = FH_STAGE_DRAINING;
}

static void
s_fold (fh_lineage_t *self, fh_consumer_t *consumer)
{
    fh_consumer_figures_final (consumer); /* late completes: fh_host_late_gone */
    fh_consumer_counts_t c;
    fh_consumer_counts (consumer, &c);
    fh_metrics_counts_add (&self->gone, &c, false); /* what only grows */
    self->handed_over += c.backlog;                 /* left in the spool: the next one's */
    fh_consumer_latency (consumer, self->scratch, NULL);
    fh_histogram_add (self->gone_queue_wait, self->scratch);
    fh_consumer_latency (consumer, NULL, self->scratch);
    fh_histogram_add (self->gone_processing, self->scratch);
    self->gone_handled += fh_consumer_handled (consumer, self->scratch);
    fh_histogram_add (self->gone_end_to_end, self->scratch);
}

void
fh_lineage_finish (fh_lineage_t *self)
{
    self->finishing = true;
}

size_t
fh_lineage_step (fh_lineage_t *self, pthread_mutex_t *lock)
{
    s_reap (self);
    while (self->count) {
        s_instance_t *oldest = &self->instances[0];
        if (oldest->stage == FH_STAGE_WAITING && self->leaving_count)
            break; /* its predecessor still holds the spool's lock, until torn down */
        if (oldest->stage == FH_STAGE_WAITING) {
            char err[1024];
            /* Opening the state reads the whole spool to count what it
               holds: outside the lock, so that STATS and scrapes do not
               wait for the disk (readers look at the spool only once the
               consumer says it is open). */
            int rc = fh_lineage_open_state (self, err, sizeof err);
            pthread_mutex_lock (lock);
            if (rc == 0) {
                /* What its predecessor left in the spool is its backlog now. */
                uint64_t inherited = fh_consumer_take_inherited (oldest->consumer);
                uint64_t moved = inherited < self->handed_over ? inherited : self->handed_over;
                self->gone.enqueued -= moved;
                self->handed_over = 0;
                rc = fh_lineage_start (self, err, sizeof err);
            }
            else
                oldest->stage = FH_STAGE_STOPPED; /* as a failed start leaves it */
            pthread_mutex_unlock (lock);
            if (rc != 0)
                fh_error ("consumer '%s': an instance cannot start: %s; the messages it "
                          "holds are released",
                          self->name, err);
            else {
                fh_info ("consumer '%s': the new instance runs", self->name);
                break;
            }
        }
        if (self->count == 1 && !self->removed && !self->finishing)
            break; /* the current instance: the enqueuer routes to it */
        if (oldest->stage != FH_STAGE_STOPPED && !fh_consumer_ended (oldest->consumer))
            break;
        /* Gone: its figures stay, it leaves the line under the lock (the
           readers see it or its figures, never neither), fini on a
           thread of its own. */
        s_instance_t gone = *oldest;
        bool successor = self->count > 1;
        if (successor) {
            fh_consumer_forget_predecessor (self->instances[1].consumer);
            fh_consumer_hand_over (gone.consumer); /* its figures are final then */
        }
        pthread_mutex_lock (lock);
        s_fold (self, gone.consumer);
        memmove (&self->instances[0], &self->instances[1],
                 (self->count - 1) * sizeof *self->instances);
        self->count--;
        pthread_mutex_unlock (lock);
        if (!self->finishing)
            fh_info ("consumer '%s': %s instance is done", self->name,
                     self->count ? "the old" : "the removed");
        s_leave (self, &gone);
    }
    return self->count + self->leaving_count;
}

bool
fh_lineage_ended (fh_lineage_t *self)
{
    for (size_t i = 0; i < self->count; i++) {
        s_instance_t *instance = &self->instances[i];
        if (instance->stage == FH_STAGE_WAITING)
            return false;
        if (instance->stage != FH_STAGE_STOPPED && !fh_consumer_ended (instance->consumer))
            return false;
    }
    return true;
}

void
fh_lineage_abandon (fh_lineage_t *self, const char *why)
{
    for (size_t i = 0; i < self->count; i++) {
        s_instance_t *instance = &self->instances[i];
        if (instance->stage == FH_STAGE_WAITING) {
            fh_consumer_counts_t c;
            fh_consumer_counts (instance->consumer, &c);
            if (c.backlog)
                fh_error ("consumer '%s': a new instance never started (%s): %llu messages "
                          "unconsumed",
                          self->name, why, (unsigned long long) c.backlog);
            continue;
        }
        if (instance->stage != FH_STAGE_STOPPED && !fh_consumer_ended (instance->consumer))
            fh_error ("consumer '%s': still busy: %s", self->name, why);
        fh_consumer_abandon (instance->consumer); /* ended ones are not joined either */
    }
    for (size_t i = 0; i < self->leaving_count; i++)
        if (!atomic_load_explicit (&self->leaving[i]->done, memory_order_acquire))
            fh_error ("consumer '%s': the fini of plugin %s has not returned: %s", self->name,
                      self->leaving[i]->plugin, why);
}

void
fh_lineage_each_started (fh_lineage_t *self, void (*fn) (fh_consumer_t *, int64_t), int64_t now_ns)
{
    for (size_t i = 0; i < self->count; i++)
        if (self->instances[i].stage == FH_STAGE_RUNNING
            || self->instances[i].stage == FH_STAGE_DRAINING)
            fn (self->instances[i].consumer, now_ns);
}

void
fh_lineage_counts (fh_lineage_t *self, fh_consumer_counts_t *out)
{
    *out = self->gone;
    /* Left in the spool by a gone instance and not yet taken by the next:
       still accepted and not started (enqueued counts them). */
    out->backlog += self->handed_over;
    out->spool_messages += self->handed_over;
    out->completions_late += fh_host_late_gone (self->name);
    for (size_t i = 0; i < self->count; i++) {
        fh_consumer_counts_t c;
        fh_consumer_counts (self->instances[i].consumer, &c);
        fh_metrics_counts_add (out, &c, true); /* the rows say how */
        out->workers = c.workers;
    }
    if (out->backlog > out->backlog_max)
        out->backlog_max = out->backlog;
}

void
fh_lineage_latency (fh_lineage_t *self, fh_histogram_snapshot_t *queue_wait,
                    fh_histogram_snapshot_t *processing)
{
    if (queue_wait)
        *queue_wait = *self->gone_queue_wait;
    if (processing)
        *processing = *self->gone_processing;
    for (size_t i = 0; i < self->count; i++) {
        if (queue_wait) {
            fh_consumer_latency (self->instances[i].consumer, self->scratch, NULL);
            fh_histogram_add (queue_wait, self->scratch);
        }
        if (processing) {
            fh_consumer_latency (self->instances[i].consumer, NULL, self->scratch);
            fh_histogram_add (processing, self->scratch);
        }
    }
}

uint64_t
fh_lineage_handled (fh_lineage_t *self, fh_histogram_snapshot_t *end_to_end)
{
    uint64_t handled = self->gone_handled;
    if (end_to_end)
        *end_to_end = *self->gone_end_to_end;
    for (size_t i = 0; i < self->count; i++) {
        handled
            += fh_consumer_handled (self->instances[i].consumer, end_to_end ? self->scratch : NULL);
        if (end_to_end)
            fh_histogram_add (end_to_end, self->scratch);
    }
    return handled;
}
