/*  stats - the hub's figures as one JSON snapshot. See stats.h. */
#include "stats.h"

#include "clock.h"
#include "process_figures.h"
#include "control.h"
#include "oom.h"
#include "plugin_metrics.h"
#include "prometheus_http.h"

#include <stdlib.h>
#include <string.h>
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
    fh_histogram_snapshot_t diff;
    fh_process_t process; /* the last reading handed in */
    bool has_process;
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
        fh_hub_consumer_latency (self->hub, i, &self->last[i].queue_wait,
                                 &self->last[i].processing);
    /* The slot after the consumers' holds end_to_end. */
    fh_hub_handled (self->hub, &self->last[self->consumer_count].queue_wait);
    return true;
}

/* One consumer's figures into item. */
static int
s_consumer (fh_stats_t *self, size_t index, fh_metrics_item_t *item)
{
    fh_consumer_t *consumer = fh_hub_consumer (self->hub, index);
    fh_consumer_counts_t c;
    fh_hub_consumer_counts (self->hub, index, &c);
    const fh_consumer_config_t *config = &fh_hub_config (self->hub)->consumers[index];
    if (fh_metrics_set_text (&item->name, fh_consumer_name (consumer)) != 0
        || fh_metrics_set_text (&item->text, config->plugin) != 0
        || fh_metrics_set_text (&item->version, fh_consumer_plugin_version (consumer)) != 0)
        return -1;
    char error[256];
    fh_consumer_last_error (consumer, error, sizeof error);
    if (error[0] && fh_metrics_set_text (&item->error, error) != 0)
        return -1;
    char publish[1024];
    fh_consumer_publish_endpoints (consumer, publish, sizeof publish);
    if (publish[0] && fh_metrics_set_text (&item->publish, publish) != 0)
        return -1;
    fh_metrics_set_int (item, FH_M_WARN_AT, (int64_t) config->warn_at);
    fh_metrics_set_int (item, FH_M_SPOOL_MAX_BYTES, (int64_t) config->spool_max_bytes);
    /* The rows that read a field of the counts (metrics_rows.h, COUNTS). */
    for (size_t id = 0; id < FH_METRIC_COUNT; id++)
        if (fh_metrics[id].sum != FH_SUM_NONE)
            fh_metrics_set_int (item, (fh_metric_id_t) id,
                                (int64_t) fh_metrics_counts_value (&c, (fh_metric_id_t) id));
    fh_hub_consumer_latency (self->hub, index, &self->scratch.queue_wait,
                             &self->scratch.processing);
    fh_histogram_diff (&self->last[index].queue_wait, &self->previous[index].queue_wait,
                       &self->diff);
    fh_metrics_latency_set (fh_metrics_latency (item, FH_M_QUEUE_WAIT), &self->scratch.queue_wait,
                            &self->diff);
    fh_histogram_diff (&self->last[index].processing, &self->previous[index].processing,
                       &self->diff);
    fh_metrics_latency_set (fh_metrics_latency (item, FH_M_PROCESSING), &self->scratch.processing,
                            &self->diff);
    /* Its plugin's own figures (ABI 1.6): the running instance's. */
    const fh_plugin_metrics_t *own = fh_consumer_plugin_metrics (consumer);
    for (size_t i = 0; i < fh_plugin_metrics_count (own); i++) {
        const fanhub_metric_t *m = &own->items[i];
        if (fh_metrics_add_own (item, m->name, m->family, m->help, m->kind == FANHUB_METRIC_GAUGE,
                                fh_plugin_metric_value (m))
            != 0)
            return -1;
    }
    /* Per worker: the share of its time spent inside consume since start. */
    double uptime_ns = (double) (fh_clock_mono_ns () - fh_hub_started_ns (self->hub));
    item->busy = c.workers ? calloc (c.workers, sizeof *item->busy) : NULL;
    if (c.workers && !item->busy)
        return -1;
    item->workers = c.workers;
    for (size_t i = 0; i < c.workers; i++)
        item->busy[i] = uptime_ns > 0 ? fh_consumer_worker_busy (consumer, i) / uptime_ns : 0.0;
    return 0;
}

/* Completion: every message handed to consumers is handled once the last
   of them is done with it; whoever released it last counted it, and the
   hub keeps the count of consumers a reload removed. */
static void
s_completion (fh_stats_t *self, fh_metrics_snapshot_t *snapshot)
{
    fh_histogram_snapshot_t *sum = &self->scratch.queue_wait;
    uint64_t handled = fh_hub_handled (self->hub, sum);
    fh_metrics_set_int (&snapshot->hub, FH_M_HANDLED, (int64_t) handled);
    size_t n = self->consumer_count;
    fh_histogram_diff (&self->last[n].queue_wait, &self->previous[n].queue_wait, &self->diff);
    fh_metrics_latency_set (fh_metrics_latency (&snapshot->hub, FH_M_END_TO_END), sum, &self->diff);
    snapshot->has_handled = snapshot->has_end_to_end = true;
}

/* bus.amqp's figures, when it is on. */
static void
s_amqp (fh_stats_t *self, fh_metrics_snapshot_t *snapshot)
{
    fh_metrics_item_t *hub = &snapshot->hub;
    fh_source_amqp_counts_t amqp;
    snapshot->has_amqp = fh_hub_amqp_counts (self->hub, &amqp);
    fh_metrics_set_int (hub, FH_M_AMQP_DELIVERED, (int64_t) amqp.delivered);
    fh_metrics_set_int (hub, FH_M_AMQP_ACKED, (int64_t) amqp.acked);
    fh_metrics_set_int (hub, FH_M_AMQP_REJECTED, (int64_t) amqp.rejected);
    fh_metrics_set_int (hub, FH_M_AMQP_REQUEUED, (int64_t) amqp.requeued);
    fh_metrics_set_int (hub, FH_M_AMQP_RECONNECTS, (int64_t) amqp.reconnects);
    fh_metrics_set_int (hub, FH_M_AMQP_UNACKED, (int64_t) amqp.unacked);
    fh_metrics_set_int (hub, FH_M_AMQP_CONNECTED, amqp.connected);
}

/* item->bound: the tcp address with the port it got. -1 when out of
   memory. */
static int
s_bound (fh_metrics_item_t *item, const char *address, int port)
{
    const char *colon = strrchr (address, ':');
    char bound[300];
    snprintf (bound, sizeof bound, "%.*s:%d", colon ? (int) (colon - address) : 0, address, port);
    return colon ? fh_metrics_set_text (&item->bound, bound) : 0;
}

/* One row per bus endpoint. -1 when out of memory. */
static int
s_endpoints (fh_stats_t *self, fh_metrics_snapshot_t *snapshot, const fh_config_t *config)
{
    /* The bus endpoints: bus.connect ones, then bus.bind ones. */
    const fh_strlist_t *kinds[] = {&config->connect, &config->bind};
    size_t index = 0;
    for (int k = 0; k < 2; k++) {
        fh_metrics_item_t *items
            = kinds[k]->count ? fh_metrics_add_endpoints (snapshot, kinds[k]->count) : NULL;
        if (kinds[k]->count && !items)
            return -1;
        for (size_t i = 0; i < kinds[k]->count; i++, index++) {
            int peers = fh_hub_endpoint_peers (self->hub, index);
            if (fh_metrics_set_text (&items[i].name, kinds[k]->items[i]) != 0
                || fh_metrics_set_text (&items[i].text, k == 0 ? "connect" : "bind") != 0)
                return -1;
            fh_endpoint_status_t status;
            fh_hub_endpoint_status (self->hub, index, &status);
            /* A connect endpoint is connected once its handshake is done. */
            fh_metrics_set_int (&items[i], FH_M_ENDPOINT_CONNECTED,
                                k == 0 ? status.connected : peers > 0);
            fh_metrics_set_int (&items[i], FH_M_ENDPOINT_PEERS, peers);
            fh_metrics_set_real (&items[i], FH_M_ENDPOINT_SINCE,
                                 (double) (status.since_ns + fh_clock_wall_offset_ns ()) / 1e9);
            fh_metrics_set_int (&items[i], FH_M_ENDPOINT_HANDSHAKE_FAILURES,
                                (int64_t) status.handshake_failures);
            if (status.last_error[0]
                && fh_metrics_set_text (&items[i].error, status.last_error) != 0)
                return -1;
            if (status.port > 0 && s_bound (&items[i], kinds[k]->items[i], status.port) != 0)
                return -1;
        }
    }
    return 0;
}

static int
s_hub (fh_stats_t *self, fh_metrics_snapshot_t *snapshot)
{
    const fh_config_t *config = fh_hub_config (self->hub);
    fh_metrics_item_t *hub = &snapshot->hub;
    if (fh_metrics_set_text (&hub->name, config->name) != 0
        || fh_metrics_set_text (&hub->text, FANHUB_VERSION) != 0)
        return -1;
    fh_metrics_set_int (hub, FH_M_PID, (int64_t) getpid ());
    fh_metrics_set_real (hub, FH_M_UPTIME,
                         (double) (fh_clock_mono_ns () - fh_hub_started_ns (self->hub)) / 1e9);
    fh_metrics_set_real (hub, FH_M_INTERVAL, (double) config->metrics.interval_ms / 1e3);
    fh_enqueuer_counts_t counts;
    fh_hub_counts (self->hub, &counts);
    fh_metrics_set_int (hub, FH_M_RECEIVED, (int64_t) counts.received);
    fh_metrics_set_int (hub, FH_M_MALFORMED, (int64_t) counts.malformed);
    fh_metrics_set_int (hub, FH_M_UNROUTED, (int64_t) counts.unrouted);
    fh_metrics_set_int (hub, FH_M_AUTH_DENIED, (int64_t) counts.auth_denied);
    fh_metrics_set_int (hub, FH_M_PEERS_REFUSED, (int64_t) counts.peers_refused);
    snapshot->has_signatures = counts.signatures;
    fh_metrics_set_int (hub, FH_M_SIG_CHECKED, (int64_t) counts.signatures_checked);
    /* The reasons' rows follow FH_M_SIG_CHECKED in fh_sig_reason_t's order. */
    _Static_assert(FH_M_SIG_CHECKED + FH_SIG_NOT_ALLOWED == FH_M_SIG_NOT_ALLOWED
                       && FH_M_SIG_CHECKED + FH_SIG_CRL_ISSUER == FH_M_SIG_CRL_ISSUER
                       && FH_M_SIG_CHECKED + FH_SIG_REASONS == FH_M_SIG_CRL_EXPIRES,
                   "signature rows out of step with fh_sig_reason_t");
    for (int i = FH_SIG_MISSING_FIELDS; i < FH_SIG_REASONS; i++)
        fh_metrics_set_int (hub, (fh_metric_id_t) (FH_M_SIG_CHECKED + i),
                            (int64_t) counts.signature_failed[i]);
    snapshot->has_crl = counts.signatures && counts.crl_next_update != 0;
    fh_metrics_set_int (hub, FH_M_SIG_CRL_EXPIRES,
                        snapshot->has_crl ? counts.crl_next_update - (int64_t) time (NULL) : 0);
    fh_metrics_set_int (hub, FH_M_CONTROL_REFUSED, (int64_t) counts.control_refused);
    fh_metrics_set_int (hub, FH_M_HTTP_REFUSED, (int64_t) fh_prometheus_http_refused ());
    fh_metrics_set_int (hub, FH_M_CONTROL_UNANSWERED, (int64_t) counts.control_unanswered);
    fh_metrics_set_int (hub, FH_M_ALLOC_FAILURES, (int64_t) fh_oom_count ());
    uint64_t draining, draining_backlog;
    fh_hub_draining (self->hub, &draining, &draining_backlog);
    fh_metrics_set_int (hub, FH_M_DRAINING, (int64_t) draining);
    fh_metrics_set_int (hub, FH_M_DRAINING_BACKLOG, (int64_t) draining_backlog);
    char reload[16];
    bool reloaded = fh_hub_reload_result (self->hub, reload, sizeof reload) > 0;
    /* Refused; a reload applied with a consumer down ("DOWN") is not. */
    fh_metrics_set_int (hub, FH_M_RELOAD_OK, !reloaded || strncmp (reload, "ERROR", 5) != 0);
    s_amqp (self, snapshot);
    for (int i = 0; i < FH_MALFORMED_REASONS; i++)
        if (fh_metrics_add_reason (
                snapshot, fh_malformed_reason_name (i),
                (fh_metric_value_t){.integer = (int64_t) counts.malformed_by_reason[i]})
            != 0)
            return -1;
    snapshot->has_upstream = counts.gap_detection;
    fh_metrics_set_int (hub, FH_M_UPSTREAM_LOST, (int64_t) counts.upstream_lost);
    fh_metrics_set_int (hub, FH_M_UPSTREAM_RESTARTS, (int64_t) counts.upstream_restarts);
    fh_metrics_set_int (hub, FH_M_UPSTREAM_UNTRACKED, (int64_t) counts.upstream_untracked);
    fh_metrics_set_int (hub, FH_M_UPSTREAM_PRODUCERS, (int64_t) counts.upstream_producers);
    return s_endpoints (self, snapshot, config);
}

void
fh_stats_set_process (fh_stats_t *self, const fh_process_t *reading)
{
    self->process = *reading;
    self->has_process = true;
}

fh_metrics_snapshot_t *
fh_stats_snapshot (fh_stats_t *self)
{
    fh_metrics_snapshot_t *snapshot = fh_metrics_snapshot_new ();
    if (!snapshot)
        return NULL;
    /* Consumers first, then completion, the hub's counts last: a message
       is counted as received before it is handed over, so read in this
       order `received` is never behind what the rest of the reply shows. */
    fh_metrics_item_t *items
        = self->consumer_count ? fh_metrics_add_consumers (snapshot, self->consumer_count) : NULL;
    int rc = self->consumer_count && !items ? -1 : 0;
    for (size_t i = 0; rc == 0 && i < self->consumer_count; i++)
        rc = s_consumer (self, i, &items[i]);
    if (rc == 0) {
        s_completion (self, snapshot);
        rc = s_hub (self, snapshot);
    }
    if (rc == 0 && self->has_process) {
        fh_process_figures (&snapshot->hub, &self->process);
        snapshot->has_process = true;
    }
    if (rc != 0)
        fh_metrics_snapshot_destroy (&snapshot);
    return snapshot;
}
