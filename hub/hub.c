/*  hub - one running fanhub. See hub.h. */
#include "hub.h"

#include "clock.h"
#include "options.h"
#include "log.h"
#include "trigger.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A consumer on its way out after a reload, and the instance that takes
   its place (NULL when it was removed), started once the old one is done. */
typedef struct {
    fh_consumer_t *old;
    fh_consumer_t *successor;
} s_retiring_t;

struct fh_hub {
    const fh_config_t *config;
    fh_consumer_t **consumers;
    size_t consumer_count;
    fh_trigger_t *trigger;
    fh_enqueuer_t *enqueuer;
    int64_t started_ns;
    bool started;
    bool stopped;
    char *plugin_dir;
    /* Reloads: configurations loaded since start (owned; kept while the
       hub lives, since plugins may keep pointers into their options), the
       consumers leaving, and the lock that other threads take to read the
       consumer list and configuration. */
    fh_config_t **configs;
    size_t config_count;
    s_retiring_t *retiring;
    size_t retiring_count;
    pthread_mutex_t lock;
    uint64_t generation;
    uint64_t reload_attempts;   /* under lock: reloads tried so far */
    char reload_result[512];    /* under lock: "OK ..." or "ERROR ..." */
};

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
fh_hub_new (const fh_config_t *config, const char *plugin_dir, char *err,
            size_t errlen)
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
    self->consumers = calloc (config->consumer_count, sizeof *self->consumers);
    self->trigger = fh_trigger_new (config->consumer_count);
    if (!self->consumers || !self->trigger) {
        snprintf (err, errlen, "out of memory");
        fh_hub_destroy (&self);
        return NULL;
    }
    for (size_t i = 0; i < config->consumer_count; i++) {
        const fh_consumer_config_t *consumer = &config->consumers[i];
        self->consumers[i] = fh_consumer_new (consumer, i, plugin_dir, err, errlen);
        if (!self->consumers[i]) {
            fh_hub_destroy (&self);
            return NULL;
        }
        self->consumer_count = i + 1;
        if (fh_consumer_open_state (self->consumers[i], config, err, errlen) != 0) {
            fh_hub_destroy (&self);
            return NULL;
        }
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
        fh_consumer_destroy (&self->consumers[i]);
    for (size_t i = 0; i < self->retiring_count; i++) {
        fh_consumer_destroy (&self->retiring[i].old);
        fh_consumer_destroy (&self->retiring[i].successor);
    }
    free (self->retiring);
    free (self->consumers);
    fh_msg_cache_drain (); /* every message is gone now */
    fh_trigger_destroy (&self->trigger);
    for (size_t i = 0; i < self->config_count; i++)
        fh_config_destroy (&self->configs[i]);
    free (self->configs);
    free (self->plugin_dir);
    pthread_mutex_destroy (&self->lock);
    free (self);
    *self_p = NULL;
}

int
fh_hub_start (fh_hub_t *self, char *err, size_t errlen)
{
    /* Consumers first: the enqueuer may hand them messages at once. */
    for (size_t i = 0; i < self->consumer_count; i++)
        if (fh_consumer_start (self->consumers[i], err, errlen) != 0)
            return -1;
    self->started = true;
    self->enqueuer = fh_enqueuer_new (self->config, self->trigger, self->consumers,
                                      self->consumer_count, err, errlen);
    return self->enqueuer ? 0 : -1;
}

void
fh_hub_stop_receiving (fh_hub_t *self)
{
    if (self->stopped)
        return;
    self->stopped = true;
    if (self->enqueuer)
        fh_enqueuer_stop (self->enqueuer);
    for (size_t i = 0; i < self->consumer_count; i++)
        fh_consumer_close (self->consumers[i]);
    /* Successors never started: their queues are simply released. */
}

bool
fh_hub_drained (fh_hub_t *self)
{
    for (size_t i = 0; i < self->consumer_count; i++)
        if (!fh_consumer_done (self->consumers[i]))
            return false;
    for (size_t i = 0; i < self->retiring_count; i++)
        if (!fh_consumer_done (self->retiring[i].old))
            return false;
    return true;
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

/* The settings that make a consumer what it is: when they are equal, a
   reload keeps the running instance (topics and warn_at may differ). */
static bool
s_same_consumer (const fh_consumer_config_t *a, const fh_consumer_config_t *b)
{
    bool same = strcmp (a->plugin, b->plugin) == 0 && a->queue_capacity == b->queue_capacity
                && a->overflow == b->overflow && a->spool_max_bytes == b->spool_max_bytes
                && a->retry.max_attempts == b->retry.max_attempts
                && a->retry.initial_ms == b->retry.initial_ms
                && a->retry.max_ms == b->retry.max_ms
                && a->retry.jitter_permille == b->retry.jitter_permille
                && a->consume_timeout_ms == b->consume_timeout_ms && a->workers == b->workers
                && a->coalesce == b->coalesce && a->max_pending == b->max_pending
                && a->write_ahead == b->write_ahead
                && ((!a->order_by && !b->order_by)
                    || (a->order_by && b->order_by && strcmp (a->order_by, b->order_by) == 0));
    if (!same)
        return false;
    return fh_option_equal (a->options, b->options);
}

int
fh_hub_reload (fh_hub_t *self, fh_config_t *config, char *err, size_t errlen)
{
    const fh_config_t *old = self->config;
    if (strcmp (old->control, config->control) != 0 || config->connect.count != old->connect.count
        || config->bind.count != old->bind.count || (config->state_dir == NULL) != (old->state_dir == NULL)
        || (config->state_dir && strcmp (config->state_dir, old->state_dir) != 0)) {
        snprintf (err, errlen, "bus endpoints, control and state_dir cannot change in a reload: "
                  "restart the hub for that");
        fh_config_destroy (&config);
        return -1;
    }
    for (size_t i = 0; i < config->connect.count; i++)
        if (strcmp (config->connect.items[i], old->connect.items[i]) != 0) {
            snprintf (err, errlen, "bus.connect cannot change in a reload: restart the hub");
            fh_config_destroy (&config);
            return -1;
        }
    for (size_t i = 0; i < config->bind.count; i++)
        if (strcmp (config->bind.items[i], old->bind.items[i]) != 0) {
            snprintf (err, errlen, "bus.bind cannot change in a reload: restart the hub");
            fh_config_destroy (&config);
            return -1;
        }
    size_t count = config->consumer_count;
    fh_consumer_t **consumers = calloc (count, sizeof *consumers);
    bool *kept = calloc (self->consumer_count + 1, sizeof *kept);
    bool *fresh = calloc (count, sizeof *fresh);     /* made by this reload */
    fh_consumer_t **replaced = calloc (count, sizeof *replaced); /* old instance of i */
    fh_trigger_t *trigger = fh_trigger_new (count);
    int rc = consumers && kept && fresh && replaced && trigger ? 0 : -1;
    if (rc != 0)
        snprintf (err, errlen, "out of memory");
    /* Match by name: keep, replace, or make new. */
    for (size_t i = 0; i < count && rc == 0; i++) {
        const fh_consumer_config_t *want = &config->consumers[i];
        size_t found = SIZE_MAX;
        for (size_t j = 0; j < self->consumer_count; j++)
            if (strcmp (fh_consumer_name (self->consumers[j]), want->name) == 0)
                found = j;
        if (found != SIZE_MAX && s_same_consumer (&old->consumers[found], want)) {
            consumers[i] = self->consumers[found];
            kept[found] = true;
        }
        else {
            consumers[i] = fh_consumer_new (want, i, self->plugin_dir, err, errlen);
            if (!consumers[i])
                rc = -1;
            else {
                fresh[i] = true;
                if (found != SIZE_MAX) {
                    replaced[i] = self->consumers[found];
                    kept[found] = true; /* retired below, not just removed */
                }
                /* A successor opens its state (the spool the old one holds)
                   when it starts, after the old one is done. */
                else if (fh_consumer_open_state (consumers[i], config, err, errlen) != 0)
                    rc = -1;
            }
        }
        if (rc == 0 && s_trigger_add (trigger, i, want) != 0) {
            snprintf (err, errlen, "out of memory");
            rc = -1;
        }
    }
    if (rc == 0) {
        fh_trigger_seal (trigger);
        for (size_t i = 0; i < count && rc == 0; i++)
            if (fresh[i] && !replaced[i] && fh_consumer_start (consumers[i], err, errlen) != 0)
                rc = -1;
    }
    if (rc == 0 && self->enqueuer)
        rc = fh_enqueuer_swap (self->enqueuer, trigger, consumers, count, err, errlen);
    if (rc != 0) {
        /* Nothing changed for the running hub: undo what was made. */
        for (size_t i = 0; consumers && i < count; i++)
            if (fresh[i]) {
                fh_consumer_close (consumers[i]);
                fh_consumer_destroy (&consumers[i]);
            }
        free (consumers);
        free (kept);
        free (fresh);
        free (replaced);
        fh_trigger_destroy (&trigger);
        fh_config_destroy (&config);
        return -1;
    }
    /* The enqueuer routes by the new table now: retire what left. */
    size_t retiring_room = self->retiring_count + self->consumer_count;
    s_retiring_t *retiring = realloc (self->retiring, (retiring_room + 1) * sizeof *retiring);
    fh_config_t **configs = realloc (self->configs, (self->config_count + 1) * sizeof *configs);
    if (retiring)
        self->retiring = retiring;
    if (configs)
        self->configs = configs;
    assert (retiring && configs); /* a few pointers: treated as fatal */
    for (size_t j = 0; j < self->consumer_count; j++)
        if (!kept[j]) {
            fh_info ("consumer '%s': removed by the reload; it finishes its queue",
                     fh_consumer_name (self->consumers[j]));
            fh_consumer_close (self->consumers[j]);
            self->retiring[self->retiring_count++] = (s_retiring_t){self->consumers[j], NULL};
        }
    for (size_t i = 0; i < count; i++)
        if (replaced[i]) {
            fh_info ("consumer '%s': changed by the reload; the new instance starts once the "
                     "old one has consumed what it holds", fh_consumer_name (consumers[i]));
            fh_consumer_retire (replaced[i]);
            self->retiring[self->retiring_count++] = (s_retiring_t){replaced[i], consumers[i]};
        }
        else if (fresh[i])
            fh_info ("consumer '%s': added by the reload", fh_consumer_name (consumers[i]));
    pthread_mutex_lock (&self->lock);
    for (size_t i = 0; i < count; i++)
        fh_consumer_set_index (consumers[i], i);
    free (self->consumers);
    self->consumers = consumers;
    self->consumer_count = count;
    fh_trigger_destroy (&self->trigger);
    self->trigger = trigger;
    self->configs[self->config_count++] = config;
    self->config = config;
    self->generation++;
    pthread_mutex_unlock (&self->lock);
    free (kept);
    free (fresh);
    free (replaced);
    return 0;
}

size_t
fh_hub_retire_step (fh_hub_t *self)
{
    size_t left = 0;
    for (size_t i = 0; i < self->retiring_count; i++) {
        s_retiring_t *r = &self->retiring[i];
        if (!fh_consumer_done (r->old)) {
            self->retiring[left++] = *r;
            continue;
        }
        fh_info ("consumer '%s': the old instance is done", fh_consumer_name (r->old));
        fh_consumer_destroy (&r->old); /* fini; releases its spool */
        if (r->successor) {
            char err[1024];
            if (fh_consumer_open_state (r->successor, self->config, err, sizeof err) != 0
                || fh_consumer_start (r->successor, err, sizeof err) != 0)
                fh_error ("consumer '%s': the new instance cannot start: %s; it takes no "
                          "messages", fh_consumer_name (r->successor), err);
            else
                fh_info ("consumer '%s': the new instance runs", fh_consumer_name (r->successor));
        }
    }
    self->retiring_count = left;
    return left;
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
fh_hub_counts (fh_hub_t *self, fh_enqueuer_counts_t *out)
{
    if (self->enqueuer)
        fh_enqueuer_counts (self->enqueuer, out);
    else
        memset (out, 0, sizeof *out);
}

uint64_t
fh_hub_handled (fh_hub_t *self, fh_histogram_snapshot_t *end_to_end)
{
    if (self->enqueuer)
        return fh_enqueuer_handled (self->enqueuer, end_to_end);
    if (end_to_end)
        memset (end_to_end, 0, sizeof *end_to_end);
    return 0;
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

json_t *
fh_hub_endpoints_json (fh_hub_t *self)
{
    json_t *list = json_array ();
    const fh_strlist_t *kinds[] = {&self->config->connect, &self->config->bind};
    size_t index = 0;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < kinds[k]->count; i++, index++) {
            int peers = self->enqueuer ? fh_enqueuer_endpoint_peers (self->enqueuer, index) : 0;
            json_array_append_new (list, json_pack ("{s:s, s:s, s:b, s:i}", "endpoint",
                                                    kinds[k]->items[i], "kind",
                                                    k == 0 ? "connect" : "bind",
                                                    "connected", peers > 0, "peers", peers));
        }
    return list;
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
             (unsigned long long) hub.received, (unsigned long long) hub.malformed,
             reasons, (unsigned long long) hub.unrouted);
    for (size_t i = 0; i < self->consumer_count; i++) {
        fh_consumer_counts_t c;
        fh_consumer_counts (self->consumers[i], &c);
        fh_log (c.dropped || c.failed ? FANHUB_LOG_WARNING : FANHUB_LOG_INFO,
                "consumer '%s': enqueued %llu, completed %llu, failed %llu, "
                "dropped %llu (queue full), unconsumed %llu",
                fh_consumer_name (self->consumers[i]), (unsigned long long) c.enqueued,
                (unsigned long long) c.completed, (unsigned long long) c.failed,
                (unsigned long long) c.dropped,
                (unsigned long long) c.backlog);
    }
}
