/*  moksha - monitoring in the shape of moksha.hub's monitor. See moksha.h.

    What moksha sends (mokshaproject/moksha, moksha.hub/moksha/hub/
    monitoring.py and api/consumer.py): MonitoringProducer.poll() runs
    every 5 s and sends json.dumps ({"consumers": [...], "producers":
    [...]}) as one frame on a PUB socket bound on moksha.monitoring.socket
    (fedmsg-check reads it with recv_json). Each consumer's __json__ gives
    name, module, topic, initialized, exceptions, jsonify, backlog,
    headcount_out, headcount_in and times, then resets headcount_in,
    headcount_out, the exception count and times: all four are per
    interval. fanhub fills them in as follows:

        name           the consumer's name (moksha: its class name)
        module         the plugin's file, its path made canonical
                       (moksha: the Python module of the class)
        topic          the topic patterns as configured: one pattern as a
                       string, several as a list (moksha sends the class's
                       topic attribute, a string or a list); "*" when the
                       consumer takes every message (fedmsg's spelling:
                       moksha strips '*' into the empty subscription)
        initialized    true: a consumer whose init failed stops the hub
        exceptions     consume calls not answered FANHUB_OK since the last
                       publish: failed + retried (moksha counts each call
                       of consume() that raised)
        jsonify        true, moksha's default
        backlog        the messages waiting in the queue now (moksha:
                       incoming.qsize(), not yet taken by a worker)
        headcount_in   messages accepted into the queue since the last
                       publish (moksha: handed to the consumer)
        headcount_out  messages taken from the queue since the last
                       publish (moksha counts one as it starts work on it)
        times          processing times, in seconds, of the messages whose
                       consume ended since the last publish: moksha sends
                       one exact time per message; fanhub has histograms,
                       so each value is the midpoint of its histogram
                       bucket (within 3.2% of the true time), listed from
                       the fastest bucket up, and at most
                       FH_MOKSHA_MAX_TIMES of them (the fastest ones when
                       there were more)
    and "producers" is always []: fanhub has no producers.

    Counters are read lock-free as the stats do; the previous readings are
    kept here, so this module is the only one that knows the boundaries of
    its intervals. Everything runs on the control actor's thread.
*/
#include "moksha.h"

#include "clock.h"
#include "fs.h"
#include "log.h"

#include <czmq.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char *module; /* the plugin's path, made canonical once */
    uint64_t enqueued;
    uint64_t dequeued;
    uint64_t unsuccessful;              /* failed + retried */
    fh_histogram_snapshot_t processing; /* whole-run, at the last publish */
} s_previous_t;

struct fh_moksha {
    fh_hub_t *hub;
    zsock_t *pub;
    char *endpoint; /* as bound, an ephemeral port resolved */
    char *ipc_path; /* to remove at the end, when ipc:// */
    int64_t interval_ns;
    int64_t next_ns; /* monotonic time of the next publish */
    size_t consumer_count;
    s_previous_t *previous;           /* one per consumer, zero at start */
    fh_histogram_snapshot_t now;      /* scratch: whole-run processing */
    fh_histogram_snapshot_t interval; /* scratch: now - previous */
    double times[FH_MOKSHA_MAX_TIMES];
};

/* The middle of a bucket's values [low, high): exact below 16 ns, where a
   bucket holds one value (as the histogram's quantiles report it). */
static double
s_midpoint_ns (unsigned bucket)
{
    uint64_t low = fh_histogram_bucket_low (bucket);
    uint64_t high = fh_histogram_bucket_high (bucket);
    return high - low <= 1 ? (double) low : ((double) low + (double) (high - 1)) / 2;
}

size_t
fh_moksha_times (const fh_histogram_snapshot_t *interval, double *out, size_t max)
{
    size_t n = 0;
    for (unsigned i = 0; i < FH_HISTOGRAM_BUCKETS && n < max; i++) {
        uint64_t count = interval->buckets[i];
        if (count == 0)
            continue;
        double seconds = s_midpoint_ns (i) / 1e9;
        for (uint64_t k = 0; k < count && n < max; k++)
            out[n++] = seconds;
    }
    return n;
}

static uint64_t
s_delta (uint64_t now, uint64_t before)
{
    return now > before ? now - before : 0;
}

/* A JSON string of text; bytes that are not UTF-8 (a plugin path may
   have any) become '?' rather than losing the field. */
static json_t *
s_string (const char *text)
{
    json_t *string = json_string (text);
    if (string)
        return string;
    char *copy = strdup (text);
    if (!copy)
        return NULL;
    for (char *c = copy; *c; c++)
        if ((unsigned char) *c >= 0x80)
            *c = '?';
    string = json_string (copy);
    free (copy);
    return string;
}

/* moksha's "topic": the class attribute as written, a string or a list. */
static json_t *
s_topic (const fh_consumer_config_t *config)
{
    if (config->topics.count == 0)
        return json_string ("*");
    if (config->topics.count == 1)
        return s_string (config->topics.items[0]);
    json_t *list = json_array ();
    for (size_t i = 0; list && i < config->topics.count; i++)
        if (json_array_append_new (list, s_string (config->topics.items[i])) != 0) {
            json_decref (list);
            list = NULL;
        }
    return list;
}

/* One consumer's entry, and its readings kept as the next "before".
   NULL when out of memory (the readings move on all the same). */
static json_t *
s_consumer_json (fh_moksha_t *self, size_t index)
{
    fh_consumer_t *consumer = fh_hub_consumer (self->hub, index);
    const fh_consumer_config_t *config = &fh_hub_config (self->hub)->consumers[index];
    s_previous_t *previous = &self->previous[index];

    fh_consumer_counts_t counts;
    fh_hub_consumer_counts (self->hub, index, &counts);
    fh_hub_consumer_latency (self->hub, index, NULL, &self->now);
    uint64_t in = s_delta (counts.enqueued, previous->enqueued);
    uint64_t out = s_delta (counts.dequeued, previous->dequeued);
    /* A RETRY answer that is tried again counts in retried; a message's
       final FAIL, or RETRY with the attempts used up, in failed. */
    uint64_t unsuccessful = counts.failed + counts.retried;
    uint64_t exceptions = s_delta (unsuccessful, previous->unsuccessful);
    fh_histogram_diff (&self->now, &previous->processing, &self->interval);
    previous->enqueued = counts.enqueued;
    previous->dequeued = counts.dequeued;
    previous->unsuccessful = unsuccessful;
    previous->processing = self->now;
    size_t n = fh_moksha_times (&self->interval, self->times, FH_MOKSHA_MAX_TIMES);

    /* Insertion order is moksha's, and jansson keeps it when dumping. The
       _new setters take the value even when they fail. */
    json_t *entry = json_object ();
    if (!entry || json_object_set_new (entry, "name", s_string (fh_consumer_name (consumer)))
        || json_object_set_new (entry, "module", s_string (previous->module))
        || json_object_set_new (entry, "topic", s_topic (config))
        || json_object_set_new (entry, "initialized", json_true ())
        || json_object_set_new (entry, "exceptions", json_integer ((json_int_t) exceptions))
        || json_object_set_new (entry, "jsonify", json_true ())
        || json_object_set_new (entry, "backlog", json_integer ((json_int_t) counts.backlog))
        || json_object_set_new (entry, "headcount_out", json_integer ((json_int_t) out))
        || json_object_set_new (entry, "headcount_in", json_integer ((json_int_t) in))) {
        json_decref (entry);
        return NULL;
    }
    json_t *times = json_array ();
    for (size_t i = 0; times && i < n; i++)
        if (json_array_append_new (times, json_real (self->times[i])) != 0) {
            json_decref (times);
            times = NULL;
        }
    if (json_object_set_new (entry, "times", times) != 0) {
        json_decref (entry);
        return NULL;
    }
    return entry;
}

char *
fh_moksha_message (fh_moksha_t *self, int64_t now_ns)
{
    if (!self || now_ns < self->next_ns)
        return NULL;
    /* Stay on the interval grid, skipping the boundaries that were missed. */
    self->next_ns += ((now_ns - self->next_ns) / self->interval_ns + 1) * self->interval_ns;
    /* Every consumer's readings move on even if the message cannot be
       built, so the next message's deltas never cover two intervals. */
    json_t *consumers = json_array ();
    bool ok = true;
    for (size_t i = 0; i < self->consumer_count; i++)
        /* Fails on a NULL array or entry, releasing the entry. */
        if (json_array_append_new (consumers, s_consumer_json (self, i)) != 0)
            ok = false;
    json_t *root = ok ? json_object () : NULL;
    char *text = NULL;
    if (root && json_object_set (root, "consumers", consumers) == 0
        && json_object_set_new (root, "producers", json_array ()) == 0)
        text = json_dumps (root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref (root);
    json_decref (consumers);
    if (!text)
        fh_warning ("moksha: out of memory: one monitoring message not sent");
    return text;
}

void
fh_moksha_send (fh_moksha_t *self, char *text)
{
    /* A PUB socket never blocks: with a slow subscriber it drops. */
    if (self && text && zmq_send (zsock_resolve (self->pub), text, strlen (text), ZMQ_DONTWAIT) < 0
        && zmq_errno () != EAGAIN)
        fh_warning ("moksha: %s: cannot send: %s", self->endpoint, zmq_strerror (zmq_errno ()));
    free (text);
}

void
fh_moksha_tick (fh_moksha_t *self, int64_t now_ns)
{
    fh_moksha_send (self, fh_moksha_message (self, now_ns));
}

/* For ipc://: makes the socket's directory (0750) when missing. */
static int
s_prepare_ipc (fh_moksha_t *self, const char *endpoint, char *err, size_t errlen)
{
    const char *path = endpoint + strlen ("ipc://");
    char why[512];
    if (fh_fs_mkdir_parent (path, why, sizeof why) != 0) {
        snprintf (err, errlen, "moksha: %s", why);
        return -1;
    }
    self->ipc_path = strdup (path);
    if (!self->ipc_path) {
        snprintf (err, errlen, "moksha: out of memory");
        return -1;
    }
    return 0;
}

fh_moksha_t *
fh_moksha_new (fh_hub_t *hub, char *err, size_t errlen)
{
    if (errlen > 0)
        err[0] = '\0';
    const fh_metrics_config_t *metrics = &fh_hub_config (hub)->metrics;
    if (!metrics->moksha_socket)
        return NULL;
    const char *endpoint = metrics->moksha_socket;
    fh_moksha_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "moksha: out of memory");
        return NULL;
    }
    self->hub = hub;
    self->consumer_count = fh_hub_consumer_count (hub);
    self->interval_ns = metrics->moksha_interval_ms * INT64_C (1000000);
    self->previous
        = calloc (self->consumer_count ? self->consumer_count : 1, sizeof *self->previous);
    self->pub = zsock_new (ZMQ_PUB);
    if (!self->previous || !self->pub) {
        snprintf (err, errlen, "moksha: out of memory");
        fh_moksha_destroy (&self);
        return NULL;
    }
    for (size_t i = 0; i < self->consumer_count; i++) {
        /* "bin/../lib/fanhub/plugins/x.so" reads better resolved. */
        const char *path = fh_consumer_plugin_path (fh_hub_consumer (hub, i));
        self->previous[i].module = realpath (path, NULL);
        if (!self->previous[i].module)
            self->previous[i].module = strdup (path);
        if (!self->previous[i].module) {
            snprintf (err, errlen, "moksha: out of memory");
            fh_moksha_destroy (&self);
            return NULL;
        }
    }
    zsock_set_linger (self->pub, 0);
    if (strncmp (endpoint, "ipc://", 6) == 0 && s_prepare_ipc (self, endpoint, err, errlen)) {
        fh_moksha_destroy (&self);
        return NULL;
    }
    if (zmq_bind (zsock_resolve (self->pub), endpoint) != 0) {
        snprintf (err, errlen, "moksha: cannot bind %s: %s", endpoint, zmq_strerror (zmq_errno ()));
        free (self->ipc_path); /* not ours to remove */
        self->ipc_path = NULL;
        fh_moksha_destroy (&self);
        return NULL;
    }
    /* Whatever the umask, the monitoring service's group may connect. */
    if (self->ipc_path && chmod (self->ipc_path, 0660) != 0) {
        snprintf (err, errlen, "moksha: cannot set mode 0660 on %s: %s", self->ipc_path,
                  strerror (errno));
        fh_moksha_destroy (&self);
        return NULL;
    }
    /* tcp://HOST:* binds an ephemeral port: say which. */
    self->endpoint = zsock_last_endpoint (self->pub);
    if (!self->endpoint)
        self->endpoint = strdup (endpoint);
    if (!self->endpoint) {
        snprintf (err, errlen, "moksha: out of memory");
        fh_moksha_destroy (&self);
        return NULL;
    }
    self->next_ns = fh_clock_mono_ns () + self->interval_ns;
    fh_info ("moksha: publishing monitoring on %s every %.3g s", self->endpoint,
             (double) metrics->moksha_interval_ms / 1000);
    return self;
}

void
fh_moksha_destroy (fh_moksha_t **self_p)
{
    fh_moksha_t *self = *self_p;
    if (!self)
        return;
    zsock_destroy (&self->pub);
    if (self->ipc_path)
        unlink (self->ipc_path);
    free (self->ipc_path);
    free (self->endpoint);
    for (size_t i = 0; self->previous && i < self->consumer_count; i++)
        free (self->previous[i].module);
    free (self->previous);
    free (self);
    *self_p = NULL;
}
