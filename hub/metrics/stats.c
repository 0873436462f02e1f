/*  stats - the hub's figures as one JSON snapshot. See stats.h. */
#include "stats.h"

#include "clock.h"

#include <stdlib.h>
#include <unistd.h>

typedef struct {
    fh_histogram_snapshot_t queue_wait;
    fh_histogram_snapshot_t processing;
} s_latency_t;

struct fh_stats {
    fh_hub_t *hub;
    size_t consumer_count;
    int64_t boundary_ns;   /* monotonic time of the last boundary */
    s_latency_t *previous; /* whole-run histograms at the boundary before */
    s_latency_t *last;     /* ... and at the last boundary */
    s_latency_t scratch;
};

fh_stats_t *
fh_stats_new (fh_hub_t *hub)
{
    fh_stats_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->hub = hub;
    self->consumer_count = fh_hub_consumer_count (hub);
    self->previous = calloc (self->consumer_count + 1, sizeof *self->previous);
    self->last = calloc (self->consumer_count + 1, sizeof *self->last);
    if (!self->previous || !self->last) {
        fh_stats_destroy (&self);
        return NULL;
    }
    self->boundary_ns = fh_hub_started_ns (hub);
    return self;
}

void
fh_stats_destroy (fh_stats_t **self_p)
{
    fh_stats_t *self = *self_p;
    if (!self)
        return;
    free (self->previous);
    free (self->last);
    free (self);
    *self_p = NULL;
}

bool
fh_stats_tick (fh_stats_t *self, int64_t now_ns)
{
    int64_t interval_ns = fh_hub_config (self->hub)->metrics.interval_ms * 1000000;
    if (now_ns - self->boundary_ns < interval_ns)
        return false;
    /* Keep boundaries on the interval grid, skipping any that were missed. */
    self->boundary_ns += (now_ns - self->boundary_ns) / interval_ns * interval_ns;
    s_latency_t *swap = self->previous;
    self->previous = self->last;
    self->last = swap;
    for (size_t i = 0; i < self->consumer_count; i++)
        fh_consumer_latency (fh_hub_consumer (self->hub, i), &self->last[i].queue_wait,
                             &self->last[i].processing);
    return true;
}

static json_t *
s_summary_json (const fh_histogram_snapshot_t *snapshot)
{
    fh_histogram_summary_t s;
    fh_histogram_summarize (snapshot, &s);
    return json_pack ("{s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "count",
                      (json_int_t) s.count, "sum", s.sum, "mean", s.mean, "p50", s.p50,
                      "p90", s.p90, "p99", s.p99, "p999", s.p999, "max", s.max);
}

static json_t *
s_latency_json (const fh_histogram_snapshot_t *whole, const fh_histogram_snapshot_t *later,
                const fh_histogram_snapshot_t *earlier, fh_histogram_snapshot_t *scratch)
{
    json_t *result = s_summary_json (whole);
    fh_histogram_diff (later, earlier, scratch);
    if (result)
        json_object_set_new (result, "interval", s_summary_json (scratch));
    return result;
}

static json_t *
s_consumer_json (fh_stats_t *self, size_t index)
{
    fh_consumer_t *consumer = fh_hub_consumer (self->hub, index);
    fh_consumer_counts_t c;
    fh_consumer_counts (consumer, &c);
    fh_consumer_latency (consumer, &self->scratch.queue_wait, &self->scratch.processing);
    json_t *json = json_pack (
        "{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
        "name", fh_consumer_name (consumer), "plugin",
        fh_hub_config (self->hub)->consumers[index].plugin, "capacity",
        (json_int_t) c.capacity, "enqueued", (json_int_t) c.enqueued, "dequeued",
        (json_int_t) c.dequeued, "completed", (json_int_t) c.completed, "failed",
        (json_int_t) c.failed, "retried", (json_int_t) c.retried, "dropped", (json_int_t) c.dropped,
        "spilled", (json_int_t) c.spilled, "dead_lettered", (json_int_t) c.dead_lettered, "coalesced",
        (json_int_t) c.coalesced, "backlog", (json_int_t) c.backlog, "in_flight",
        (json_int_t) c.in_flight, "backlog_max", (json_int_t) c.backlog_max, "stuck",
        (json_int_t) c.stuck);
    if (!json)
        return NULL;
    fh_histogram_snapshot_t *diff = malloc (sizeof *diff);
    if (!diff) {
        json_decref (json);
        return NULL;
    }
    json_object_set_new (json, "queue_wait",
                         s_latency_json (&self->scratch.queue_wait, &self->last[index].queue_wait,
                                         &self->previous[index].queue_wait, diff));
    json_object_set_new (json, "processing",
                         s_latency_json (&self->scratch.processing, &self->last[index].processing,
                                         &self->previous[index].processing, diff));
    free (diff);
    /* Per worker: the share of its time spent inside consume since start. */
    double uptime_ns = (double) (fh_clock_mono_ns () - fh_hub_started_ns (self->hub));
    json_t *workers = json_array ();
    for (size_t i = 0; i < c.workers; i++)
        json_array_append_new (
            workers, json_pack ("{s:f}", "busy",
                                uptime_ns > 0 ? fh_consumer_worker_busy (consumer, i) / uptime_ns
                                              : 0.0));
    json_object_set_new (json, "workers", workers);
    json_object_set_new (json, "keys_active", json_integer ((json_int_t) c.keys_active));
    json_object_set_new (json, "key_backlog_max", json_integer ((json_int_t) c.key_backlog_max));
    json_object_set_new (json, "key_fallback", json_integer ((json_int_t) c.key_fallback));
    json_object_set_new (json, "evicted", json_integer ((json_int_t) c.evicted));
    json_object_set_new (json, "spool_bytes", json_integer ((json_int_t) c.spool_bytes));
    json_object_set_new (json, "spool_corrupt", json_integer ((json_int_t) c.spool_corrupt));
    json_object_set_new (json, "spool_cursor_errors",
                         json_integer ((json_int_t) c.spool_cursor_errors));
    return json;
}

json_t *
fh_stats_json (fh_stats_t *self)
{
    const fh_config_t *config = fh_hub_config (self->hub);
    /* Consumers first, then completion, the hub's counts last: a message
       is counted as received before it is handed over, so read in this
       order `received` is never behind what the rest of the reply shows. */
    json_t *consumers = json_array ();
    for (size_t i = 0; i < self->consumer_count; i++)
        json_array_append_new (consumers, s_consumer_json (self, i));
    /* Completion: every message handed to consumers is handled once the
       last of them is done with it; whoever released it last counted it. */
    fh_histogram_snapshot_t *sum = calloc (1, sizeof *sum);
    fh_histogram_snapshot_t *part = malloc (sizeof *part);
    uint64_t handled = 0;
    if (sum && part) {
        handled = fh_hub_handled (self->hub, part);
        fh_histogram_add (sum, part);
        for (size_t i = 0; i < self->consumer_count; i++) {
            handled += fh_consumer_handled (fh_hub_consumer (self->hub, i), part);
            fh_histogram_add (sum, part);
        }
    }
    json_t *end_to_end = sum && part ? s_summary_json (sum) : NULL;
    free (sum);
    free (part);
    fh_enqueuer_counts_t counts;
    fh_hub_counts (self->hub, &counts);
    json_t *by_reason = json_object ();
    for (int i = 0; i < FH_MALFORMED_REASONS; i++)
        json_object_set_new (by_reason, fh_malformed_reason_name (i),
                             json_integer ((json_int_t) counts.malformed_by_reason[i]));
    json_t *hub = json_pack (
        "{s:o, s:s, s:i, s:f, s:f, s:I, s:I, s:o, s:I, s:o}", "name",
        config->name ? json_string (config->name) : json_null (), "version", FANHUB_VERSION,
        "pid", (int) getpid (), "uptime",
        (double) (fh_clock_mono_ns () - fh_hub_started_ns (self->hub)) / 1e9, "interval",
        (double) config->metrics.interval_ms / 1e3, "received", (json_int_t) counts.received,
        "malformed", (json_int_t) counts.malformed, "malformed_by_reason", by_reason,
        "unrouted", (json_int_t) counts.unrouted, "endpoints", fh_hub_endpoints_json (self->hub));
    if (end_to_end && hub) {
        json_object_set_new (hub, "handled", json_integer ((json_int_t) handled));
        json_object_set_new (hub, "end_to_end", end_to_end);
    } else
        json_decref (end_to_end);
    if (counts.gap_detection && hub)
        json_object_set_new (hub, "upstream",
                             json_pack ("{s:I, s:I, s:I, s:I}", "lost",
                                        (json_int_t) counts.upstream_lost, "restarts",
                                        (json_int_t) counts.upstream_restarts, "untracked",
                                        (json_int_t) counts.upstream_untracked, "producers",
                                        (json_int_t) counts.upstream_producers));
    return json_pack ("{s:o, s:o}", "hub", hub, "consumers", consumers);
}
