/*  hub - one running fanhub. See hub.h. */
#include "hub.h"

#include "clock.h"
#include "log.h"
#include "trigger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fh_hub {
    const fh_config_t *config;
    fh_consumer_t **consumers;
    size_t consumer_count;
    fh_trigger_t *trigger;
    fh_enqueuer_t *enqueuer;
    int64_t started_ns;
    bool started;
    bool stopped;
};

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
        int rc = 0;
        if (consumer->topics.count == 0)
            rc = fh_trigger_add (self->trigger, i, "");
        for (size_t t = 0; t < consumer->topics.count && rc == 0; t++)
            rc = fh_trigger_add (self->trigger, i, consumer->topics.items[t]);
        if (rc != 0) {
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
    free (self->consumers);
    fh_trigger_destroy (&self->trigger);
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
}

bool
fh_hub_drained (fh_hub_t *self)
{
    for (size_t i = 0; i < self->consumer_count; i++)
        if (!fh_consumer_done (self->consumers[i]))
            return false;
    return true;
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
                (unsigned long long) (c.enqueued - c.dequeued));
    }
}
