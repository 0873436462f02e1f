/*  metrics - the registry of the hub's metrics and the snapshot of their
    values. See metrics.h; docs/metrics.md describes every row. */
#include "metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define C FH_METRIC_COUNTER
#define G FH_METRIC_GAUGE
#define H FH_METRIC_HISTOGRAM
#define F FH_METRIC_FIELD
#define I FH_METRIC_INFO

/* A row of its own ("of" is itself) and a histogram's max. */
#define ROW(id, scope, json, prom, collectd, type, real, unit, help)                               \
    [id] = {id, scope, json, prom, collectd, type, real, unit, id, help}
#define MAX_OF(id, of, scope, json, prom, collectd, help)                                          \
    [id] = {id, scope, json, prom, collectd, G, true, "seconds", of, help}

/* In the order of the Prometheus text and of the JSON objects. */
const fh_metric_t fh_metrics[FH_METRIC_COUNT] = {
    ROW (FH_M_NAME, FH_SCOPE_HUB, "name", NULL, NULL, F, false, "",
         "The hub's configured name: (null when none); a label of fanhub_info."),
    ROW (FH_M_VERSION, FH_SCOPE_HUB, "version", "fanhub_info", NULL, FH_METRIC_INFO, false, "",
         "Constant 1, labelled with the hub's version and configured name."),
    ROW (FH_M_PID, FH_SCOPE_HUB, "pid", NULL, NULL, F, false, "", "Process id of the hub."),
    ROW (FH_M_UPTIME, FH_SCOPE_HUB, "uptime", "fanhub_uptime_seconds", "uptime", G, true, "seconds",
         "Seconds since the hub started."),
    ROW (FH_M_INTERVAL, FH_SCOPE_HUB, "interval", NULL, NULL, F, true, "seconds",
         "metrics.interval: the span of the interval latency figures."),
    ROW (FH_M_RECEIVED, FH_SCOPE_HUB, "received", "fanhub_received_total", "derive-received", C,
         false, "messages", "Bus messages read, malformed ones included."),
    ROW (FH_M_MALFORMED, FH_SCOPE_HUB, "malformed", "fanhub_malformed_total", "derive-malformed", C,
         false, "messages", "Bus messages dropped as malformed, by reason."),
    ROW (FH_M_MALFORMED_BY_REASON, FH_SCOPE_HUB, "malformed_by_reason", NULL, NULL, C, false,
         "messages", "Malformed messages by reason; the reason label of fanhub_malformed_total."),
    ROW (FH_M_UNROUTED, FH_SCOPE_HUB, "unrouted", "fanhub_unrouted_total", "derive-unrouted", C,
         false, "messages", "Well-formed bus messages that matched no consumer."),
    ROW (FH_M_AUTH_DENIED, FH_SCOPE_HUB, "auth_denied", "fanhub_auth_denied_total",
         "derive-auth_denied", C, false, "handshakes",
         "Bus handshakes refused by the ZAP handler (docs/security.md)."),
    ROW (FH_M_PEERS_REFUSED, FH_SCOPE_HUB, "peers_refused", "fanhub_peers_refused_total",
         "derive-peers_refused", C, false, "connections",
         "Connections to a bus.bind endpoint dropped at once: it had bus.max_peers already, or "
         "the hub had no descriptor left for them."),
    ROW (FH_M_SIG_CHECKED, FH_SCOPE_SIGNATURES, "checked", "fanhub_signatures_checked_total",
         "derive-signatures_checked", C, false, "messages",
         "Bus messages whose fedmsg signature was checked (bus.validate_signatures)."),
    ROW (FH_M_SIG_MISSING_FIELDS, FH_SCOPE_SIGNATURES, "missing_fields",
         "fanhub_signature_missing_fields_total", "derive-signature_missing_fields", C, false,
         "messages",
         "Checked bus messages that had no topic, signature or certificate, or were not a JSON "
         "object."),
    ROW (FH_M_SIG_BAD_CERTIFICATE, FH_SCOPE_SIGNATURES, "bad_certificate",
         "fanhub_signature_bad_certificate_total", "derive-signature_bad_certificate", C, false,
         "messages", "Checked bus messages that carried a certificate that does not parse."),
    ROW (FH_M_SIG_BAD_SIGNATURE, FH_SCOPE_SIGNATURES, "bad_signature",
         "fanhub_signature_bad_signature_total", "derive-signature_bad_signature", C, false,
         "messages", "Checked bus messages that carried a signature that does not match the body."),
    ROW (FH_M_SIG_TOPIC_MISMATCH, FH_SCOPE_SIGNATURES, "topic_mismatch",
         "fanhub_signature_topic_mismatch_total", "derive-signature_topic_mismatch", C, false,
         "messages",
         "Checked bus messages that named another topic in the envelope than in the topic frame."),
    ROW (FH_M_SIG_UNKNOWN_CA, FH_SCOPE_SIGNATURES, "unknown_ca",
         "fanhub_signature_unknown_ca_total", "derive-signature_unknown_ca", C, false, "messages",
         "Checked bus messages that were signed with a certificate that does not chain to the CA."),
    ROW (FH_M_SIG_REVOKED, FH_SCOPE_SIGNATURES, "revoked", "fanhub_signature_revoked_total",
         "derive-signature_revoked", C, false, "messages",
         "Checked bus messages that were signed with a certificate the CRL revokes."),
    ROW (FH_M_SIG_NOT_ALLOWED, FH_SCOPE_SIGNATURES, "not_allowed",
         "fanhub_signature_not_allowed_total", "derive-signature_not_allowed", C, false, "messages",
         "Checked bus messages that were signed by a name the routing policy does not allow for "
         "the topic."),
    ROW (FH_M_SIG_TOO_LARGE, FH_SCOPE_SIGNATURES, "too_large", "fanhub_signature_too_large_total",
         "derive-signature_too_large", C, false, "messages",
         "Checked bus messages whose certificate or signature field was over max_field_bytes "
         "(refused before decoding)."),
    ROW (FH_M_SIG_BAD_CHAIN, FH_SCOPE_SIGNATURES, "bad_chain", "fanhub_signature_bad_chain_total",
         "derive-signature_bad_chain", C, false, "messages",
         "Checked bus messages whose certificate chains to the CA but fails otherwise (expired, "
         "not yet valid, not a CA on the way)."),
    ROW (FH_M_SIG_CRL_EXPIRED, FH_SCOPE_SIGNATURES, "crl_expired",
         "fanhub_signature_crl_expired_total", "derive-signature_crl_expired", C, false, "messages",
         "Checked bus messages refused because the CRL is past its nextUpdate "
         "(on_crl_expired: reject)."),
    ROW (FH_M_SIG_CRL_ISSUER, FH_SCOPE_SIGNATURES, "crl_issuer",
         "fanhub_signature_crl_issuer_total", "derive-signature_crl_issuer", C, false, "messages",
         "Checked bus messages whose certificate's issuer has no CRL among those loaded."),
    ROW (FH_M_SIG_CRL_EXPIRES, FH_SCOPE_SIGNATURES, "crl_expires_seconds",
         "fanhub_signature_crl_expires_seconds", "gauge-signature_crl_expires", G, false, "seconds",
         "Seconds until the CRL's nextUpdate (negative: past it); only with a CRL that has one."),
    ROW (FH_M_CONTROL_REFUSED, FH_SCOPE_HUB, "control_refused", "fanhub_control_refused_total",
         "derive-control_refused", C, false, "connections",
         "Control socket connections dropped: as many clients as the descriptors allow."),
    ROW (FH_M_HTTP_REFUSED, FH_SCOPE_HUB, "http_refused", "fanhub_http_refused_total",
         "derive-http_refused", C, false, "connections",
         "/metrics connections dropped: 64 open already."),
    ROW (FH_M_CONTROL_UNANSWERED, FH_SCOPE_HUB, "control_unanswered",
         "fanhub_control_unanswered_total", "derive-control_unanswered", C, false, "answers",
         "Control answers not sent: the client's pipe was full, or it was gone."),
    ROW (FH_M_ALLOC_FAILURES, FH_SCOPE_HUB, "alloc_failures", "fanhub_alloc_failures_total",
         "derive-alloc_failures", C, false, "allocations",
         "Allocations that failed on the hub's paths; what needed them was dropped and counted."),
    ROW (FH_M_AMQP_DELIVERED, FH_SCOPE_AMQP, "delivered", "fanhub_amqp_delivered_total",
         "derive-amqp_delivered", C, false, "messages",
         "Deliveries received from RabbitMQ (bus.amqp)."),
    ROW (FH_M_AMQP_ACKED, FH_SCOPE_AMQP, "acked", "fanhub_amqp_acked_total", "derive-amqp_acked", C,
         false, "messages",
         "bus.amqp deliveries acked: done by every consumer they went to, or unrouted."),
    ROW (FH_M_AMQP_REJECTED, FH_SCOPE_AMQP, "rejected", "fanhub_amqp_rejected_total",
         "derive-amqp_rejected", C, false, "messages",
         "bus.amqp deliveries rejected without requeue (malformed): to the dead-letter exchange."),
    ROW (FH_M_AMQP_REQUEUED, FH_SCOPE_AMQP, "requeued", "fanhub_amqp_requeued_total",
         "derive-amqp_requeued", C, false, "messages",
         "bus.amqp deliveries given back to the broker: every consumer refused them."),
    ROW (FH_M_AMQP_RECONNECTS, FH_SCOPE_AMQP, "reconnects", "fanhub_amqp_reconnects_total",
         "derive-amqp_reconnects", C, false, "connections",
         "Connections to RabbitMQ made after the first (bus.amqp)."),
    ROW (FH_M_AMQP_UNACKED, FH_SCOPE_AMQP, "unacked", "fanhub_amqp_unacked",
         "queue_length-amqp_unacked", G, false, "messages",
         "bus.amqp deliveries open now: handed to the hub, not answered yet."),
    ROW (FH_M_AMQP_CONNECTED, FH_SCOPE_AMQP, "connected", "fanhub_amqp_connected",
         "bool-amqp_connected", G, false, "0/1",
         "1 while bus.amqp is connected and consuming, else 0."),
    ROW (FH_M_HANDLED, FH_SCOPE_HUB, "handled", "fanhub_handled_total", "derive-handled", C, false,
         "messages", "Messages every consumer they went to is done with."),
    ROW (FH_M_END_TO_END, FH_SCOPE_HUB, "end_to_end", "fanhub_end_to_end_seconds",
         "latency-end_to_end", H, true, "seconds",
         "Time from the hub receiving a message to it being handled, since start."),
    MAX_OF (FH_M_END_TO_END_MAX, FH_M_END_TO_END, FH_SCOPE_HUB, "end_to_end.max",
            "fanhub_end_to_end_max_seconds", "latency-end_to_end_max",
            "Longest time to handled since the hub started."),
    ROW (FH_M_DRAINING, FH_SCOPE_HUB, "draining", "fanhub_draining_instances", "count-draining", G,
         false, "instances",
         "Consumer instances a reload replaced or removed that still consume what they hold."),
    ROW (FH_M_DRAINING_BACKLOG, FH_SCOPE_HUB, "draining_backlog", "fanhub_draining_backlog",
         "queue_length-draining", G, false, "messages",
         "Messages those draining instances still hold, queue and spool."),
    ROW (FH_M_RELOAD_OK, FH_SCOPE_HUB, "config_last_reload_successful",
         "fanhub_config_last_reload_successful", "bool-config_last_reload_successful", G, false,
         "0/1", "0 when the last reload was refused, else 1 (also before any reload)."),

    ROW (FH_M_UPSTREAM_LOST, FH_SCOPE_UPSTREAM, "lost", "fanhub_upstream_lost_total",
         "derive-upstream_lost", C, false, "messages",
         "Sequence numbers a producer skipped: messages lost before the hub."),
    ROW (FH_M_UPSTREAM_RESTARTS, FH_SCOPE_UPSTREAM, "restarts", "fanhub_upstream_restarts_total",
         "derive-upstream_restarts", C, false, "events",
         "Times a producer's sequence went back (a restart, or out of order)."),
    ROW (FH_M_UPSTREAM_UNTRACKED, FH_SCOPE_UPSTREAM, "untracked", "fanhub_upstream_untracked_total",
         "derive-upstream_untracked", C, false, "messages",
         "Messages without a usable sequence or producer, or beyond max_producers."),
    ROW (FH_M_UPSTREAM_PRODUCERS, FH_SCOPE_UPSTREAM, "producers", "fanhub_upstream_producers",
         "count-upstream_producers", G, false, "producers", "Producers tracked."),

    ROW (FH_M_ENDPOINT, FH_SCOPE_ENDPOINT, "endpoint", NULL, NULL, F, false, "",
         "The bus endpoint as configured; the endpoint label."),
    ROW (FH_M_ENDPOINT_KIND, FH_SCOPE_ENDPOINT, "kind", NULL, NULL, F, false, "",
         "connect or bind; the kind label."),
    ROW (FH_M_ENDPOINT_CONNECTED, FH_SCOPE_ENDPOINT, "connected", "fanhub_endpoint_connected",
         "bool-connected", G, false, "0/1",
         "1 while at least one peer is connected on the bus endpoint, else 0."),
    ROW (FH_M_ENDPOINT_PEERS, FH_SCOPE_ENDPOINT, "peers", NULL, NULL, G, false, "connections",
         "Connections up on the bus endpoint."),
    ROW (FH_M_ENDPOINT_SINCE, FH_SCOPE_ENDPOINT, "since", "fanhub_endpoint_since_timestamp_seconds",
         "gauge-since", G, true, "seconds",
         "Unix time the bus endpoint last became connected or not (or the hub started)."),
    ROW (FH_M_ENDPOINT_LAST_ERROR, FH_SCOPE_ENDPOINT, "last_error", NULL, NULL, F, false, "",
         "The last cause ZeroMQ gave for the bus endpoint not being connected; null when none."),
    ROW (FH_M_ENDPOINT_HANDSHAKE_FAILURES, FH_SCOPE_ENDPOINT, "handshake_failures",
         "fanhub_endpoint_handshake_failures_total", "derive-handshake_failures", C, false,
         "handshakes",
         "ZMTP handshakes on the bus endpoint that failed (mechanism, key, ZAP, hang-up)."),

    ROW (FH_M_CONSUMER_NAME, FH_SCOPE_CONSUMER, "name", NULL, NULL, F, false, "",
         "The consumer's name; the consumer label."),
    ROW (FH_M_CONSUMER_PLUGIN, FH_SCOPE_CONSUMER, "plugin", NULL, NULL, F, false, "",
         "The consumer's plugin as configured."),
    ROW (FH_M_CONSUMER_INFO, FH_SCOPE_CONSUMER, "plugin_version", "fanhub_consumer_info", NULL, I,
         false, "", "Constant 1, labelled with the consumer, its plugin and the plugin's version."),
    ROW (FH_M_ENQUEUED, FH_SCOPE_CONSUMER, "enqueued", "fanhub_consumer_enqueued_total",
         "derive-enqueued", C, false, "messages",
         "Messages put on the consumer's queue (or its spool)."),
    ROW (FH_M_DEQUEUED, FH_SCOPE_CONSUMER, "dequeued", "fanhub_consumer_dequeued_total",
         "derive-dequeued", C, false, "messages",
         "Messages taken off the consumer's queue to be consumed."),
    ROW (FH_M_COMPLETED, FH_SCOPE_CONSUMER, "completed", "fanhub_consumer_completed_total",
         "derive-completed", C, false, "messages",
         "Messages the consumer's plugin finished with ok."),
    ROW (FH_M_FAILED, FH_SCOPE_CONSUMER, "failed", "fanhub_consumer_failed_total", "derive-failed",
         C, false, "messages",
         "Messages that failed for good: the plugin answered fail, or retries ran out."),
    ROW (FH_M_RETRIED, FH_SCOPE_CONSUMER, "retried", "fanhub_consumer_retried_total",
         "derive-retried", C, false, "calls",
         "Times a message was tried again after the plugin answered retry."),
    ROW (FH_M_DROPPED, FH_SCOPE_CONSUMER, "dropped", "fanhub_consumer_dropped_total",
         "derive-dropped", C, false, "messages",
         "Messages dropped by the overflow policy of the consumer's full queue."),
    ROW (FH_M_SPILLED, FH_SCOPE_CONSUMER, "spilled", "fanhub_consumer_spilled_total",
         "derive-spilled", C, false, "messages", "Messages written to the consumer's disk spool."),
    ROW (FH_M_DEAD_LETTERED, FH_SCOPE_CONSUMER, "dead_lettered",
         "fanhub_consumer_dead_lettered_total", "derive-dead_lettered", C, false, "messages",
         "Messages sent to the consumer's dead-letter store."),
    ROW (FH_M_COALESCED, FH_SCOPE_CONSUMER, "coalesced", "fanhub_consumer_coalesced_total",
         "derive-coalesced", C, false, "messages",
         "Messages merged into one already queued instead of being consumed on their own."),
    ROW (FH_M_BACKLOG, FH_SCOPE_CONSUMER, "backlog", "fanhub_consumer_backlog", "queue_length", G,
         false, "messages",
         "Messages waiting for the consumer: enqueued - dequeued, spool included."),
    ROW (FH_M_IN_FLIGHT, FH_SCOPE_CONSUMER, "in_flight", "fanhub_consumer_in_flight",
         "count-in_flight", G, false, "messages",
         "Messages being consumed now: dequeued - completed - failed."),
    ROW (FH_M_BACKLOG_MAX, FH_SCOPE_CONSUMER, "backlog_max", "fanhub_consumer_backlog_max",
         "queue_length-max", G, false, "messages", "Highest backlog since the hub started."),
    ROW (FH_M_CAPACITY, FH_SCOPE_CONSUMER, "capacity", "fanhub_consumer_capacity",
         "queue_length-capacity", G, false, "messages",
         "Messages the consumer's queue holds before its overflow policy applies."),
    ROW (FH_M_WARN_AT, FH_SCOPE_CONSUMER, "warn_at", "fanhub_consumer_warn_at",
         "queue_length-warn_at", G, false, "messages",
         "queue.warn_at: the backlog at which the hub warns; 0 when it never does."),
    ROW (FH_M_STUCK, FH_SCOPE_CONSUMER, "stuck", "fanhub_consumer_stuck", "count-stuck", G, false,
         "workers", "Consume calls running now for longer than the stuck threshold."),
    ROW (FH_M_EVICTED, FH_SCOPE_CONSUMER, "evicted", "fanhub_consumer_evicted_total",
         "derive-evicted", C, false, "messages",
         "Accepted messages dropped later (also in dropped): drop-oldest evictions, spilled "
         "messages the spool could not store."),
    ROW (FH_M_SPOOL_BYTES, FH_SCOPE_CONSUMER, "spool_bytes", "fanhub_consumer_spool_bytes",
         "bytes-spool", G, false, "bytes", "Bytes of spooled messages not yet consumed."),
    ROW (FH_M_SPOOL_MAX_BYTES, FH_SCOPE_CONSUMER, "spool_max_bytes",
         "fanhub_consumer_spool_max_bytes", "bytes-spool_max", G, false, "bytes",
         "queue.spool_max_bytes: the most bytes the spool may hold; 0 when unlimited."),
    ROW (FH_M_SPOOL_CORRUPT, FH_SCOPE_CONSUMER, "spool_corrupt",
         "fanhub_consumer_spool_corrupt_total", "derive-spool_corrupt", C, false, "records",
         "Damaged spool records or regions skipped."),
    ROW (FH_M_SPOOL_LOST, FH_SCOPE_CONSUMER, "spool_lost", "fanhub_consumer_spool_lost_total",
         "derive-spool_lost", C, false, "records",
         "Spooled records lost: segments missing or cut short, a removed spool directory."),
    ROW (FH_M_SPOOL_CURSOR_ERRORS, FH_SCOPE_CONSUMER, "spool_cursor_errors",
         "fanhub_consumer_spool_cursor_errors_total", "errors-spool_cursor", C, false, "writes",
         "Spool cursor writes that failed (each is tried again)."),
    ROW (FH_M_SPOOL_FSYNCS, FH_SCOPE_CONSUMER, "spool_fsyncs", "fanhub_consumer_spool_fsyncs_total",
         "operations-spool_fsync", C, false, "syncs",
         "fdatasync calls on the spool's segments (one per group commit with fsync: always)."),
    ROW (FH_M_SPOOL_HANDOFF, FH_SCOPE_CONSUMER, "spool_handoff", "fanhub_consumer_spool_handoff",
         "queue_length-spool_handoff", G, false, "messages",
         "Spilled messages handed to the spool's writer thread and not yet written."),
    ROW (FH_M_SPOOL_MESSAGES, FH_SCOPE_CONSUMER, "spool_messages", "fanhub_consumer_spool_messages",
         "queue_length-spool", G, false, "messages",
         "Messages of the backlog written to the spool and not yet read back."),
    ROW (FH_M_KEYS_ACTIVE, FH_SCOPE_CONSUMER, "keys_active", "fanhub_consumer_keys_active",
         "count-keys_active", G, false, "keys",
         "Pool: keys with a message queued, running or waiting for a retry."),
    ROW (FH_M_KEY_BACKLOG_MAX, FH_SCOPE_CONSUMER, "key_backlog_max",
         "fanhub_consumer_key_backlog_max", "queue_length-key_max", G, false, "messages",
         "Pool: the most messages one key has had queued at once."),
    ROW (FH_M_KEY_FALLBACK, FH_SCOPE_CONSUMER, "key_fallback", "fanhub_consumer_key_fallback_total",
         "derive-key_fallback", C, false, "messages",
         "Pool: messages whose order_by key could not be read, given the fallback key."),
    ROW (FH_M_RESTARTS, FH_SCOPE_CONSUMER, "restarts", "fanhub_consumer_restarts_total",
         "derive-restarts", C, false, "processes",
         "Worker processes the consumer's plugin started again after one ended (ABI 1.3)."),
    ROW (FH_M_SKIPPED, FH_SCOPE_CONSUMER, "skipped", "fanhub_consumer_skipped_total",
         "derive-skipped", C, false, "messages",
         "Messages done without being processed (a worker's DROP answer)."),
    ROW (
        FH_M_PUBLISHED, FH_SCOPE_CONSUMER, "published", "fanhub_consumer_published_total",
        "derive-published", C, false, "messages",
        "Messages the consumer's plugin published, accepted for its publish: endpoints (ABI 1.5)."),
    ROW (FH_M_PUBLISH_FAILED, FH_SCOPE_CONSUMER, "publish_failed",
         "fanhub_consumer_publish_failed_total", "derive-publish_failed", C, false, "messages",
         "Messages the consumer's plugin published that were dropped: no publish:, a full "
         "queue, a body that is not JSON with envelope: fedmsg."),
    ROW (FH_M_PLUGIN_STATE, FH_SCOPE_CONSUMER, "state", "fanhub_consumer_state", "gauge-state", G,
         false, "state",
         "What the plugin says it is doing: 0 up, 1 down, 2 halted (ABI 1.3); 3 paused "
         "(fanhub pause)."),
    ROW (FH_M_LAST_ERROR, FH_SCOPE_CONSUMER, "last_error", NULL, NULL, F, false, "",
         "The last error the consumer's plugin reported (\"\" when none)."),
    ROW (FH_M_TICKETS_EXPIRED, FH_SCOPE_CONSUMER, "tickets_expired",
         "fanhub_consumer_tickets_expired_total", "derive-tickets_expired", C, false, "attempts",
         "PENDING answers not completed within consume_timeout: the attempt failed (retried)."),
    ROW (FH_M_COMPLETIONS_LATE, FH_SCOPE_CONSUMER, "completions_late",
         "fanhub_consumer_completions_late_total", "derive-completions_late", C, false, "calls",
         "host->complete calls for a ticket no longer open (expired, abandoned, done): ignored."),
    ROW (FH_M_TICKETS_ABANDONED, FH_SCOPE_CONSUMER, "tickets_abandoned",
         "fanhub_consumer_tickets_abandoned_total", "derive-tickets_abandoned", C, false,
         "messages", "PENDING messages given up when a reload or stop stopped waiting: not done."),
    ROW (FH_M_QUEUE_BYTES, FH_SCOPE_CONSUMER, "queue_bytes", "fanhub_consumer_queue_bytes",
         "bytes-queue", G, false, "bytes",
         "Payload bytes the consumer holds in memory, not yet started."),
    ROW (FH_M_QUEUE_WAIT, FH_SCOPE_CONSUMER, "queue_wait", "fanhub_consumer_queue_wait_seconds",
         "latency-queue_wait", H, true, "seconds",
         "Time from the hub receiving a message to the consumer starting on it, since start."),
    ROW (FH_M_PROCESSING, FH_SCOPE_CONSUMER, "processing", "fanhub_consumer_processing_seconds",
         "latency-processing", H, true, "seconds",
         "Time the consumer's plugin took for a message, since start."),
    MAX_OF (FH_M_QUEUE_WAIT_MAX, FH_M_QUEUE_WAIT, FH_SCOPE_CONSUMER, "queue_wait.max",
            "fanhub_consumer_queue_wait_max_seconds", "latency-queue_wait_max",
            "Longest queue wait since the hub started."),
    MAX_OF (FH_M_PROCESSING_MAX, FH_M_PROCESSING, FH_SCOPE_CONSUMER, "processing.max",
            "fanhub_consumer_processing_max_seconds", "latency-processing_max",
            "Longest processing time since the hub started."),
    ROW (FH_M_WORKERS, FH_SCOPE_CONSUMER, "workers", NULL, NULL, G, true, "share, 0 to 1",
         "Per worker: the share of the time since start spent inside consume."),

    ROW (FH_M_PROCESS_START_TIME, FH_SCOPE_PROCESS, "start_time", "process_start_time_seconds",
         "gauge-start_time", G, true, "seconds",
         "Start time of the process since the Unix epoch in seconds."),
    ROW (FH_M_PROCESS_CPU, FH_SCOPE_PROCESS, "cpu_seconds", "process_cpu_seconds_total",
         "total_time_in_ms-cpu", C, true, "seconds",
         "Total user and system CPU time spent in seconds."),
    ROW (FH_M_PROCESS_RESIDENT, FH_SCOPE_PROCESS, "resident_memory_bytes",
         "process_resident_memory_bytes", "memory-resident", G, false, "bytes",
         "Resident memory size in bytes."),
    ROW (FH_M_PROCESS_VIRTUAL, FH_SCOPE_PROCESS, "virtual_memory_bytes",
         "process_virtual_memory_bytes", "memory-virtual", G, false, "bytes",
         "Virtual memory size in bytes."),
    ROW (FH_M_PROCESS_OPEN_FDS, FH_SCOPE_PROCESS, "open_fds", "process_open_fds", "files-open", G,
         false, "files", "Number of open file descriptors."),
    ROW (FH_M_PROCESS_MAX_FDS, FH_SCOPE_PROCESS, "max_fds", "process_max_fds", "files-max", G,
         false, "files", "Maximum number of open file descriptors."),
};

/* The upper bound of bucket index, in seconds. */
static double
s_bucket_le (size_t index)
{
    return ldexp (1e-9, (int) (index + FH_METRICS_BUCKET_FIRST_LOG2));
}

void
fh_metrics_bucket_text (size_t index, char *text, size_t size)
{
    snprintf (text, size, "%.9g", s_bucket_le (index));
    for (char *c = text; *c; c++)
        if (*c == ',')
            *c = '.'; /* a locale's decimal comma */
}

int64_t
fh_metric_value_int (const fh_metric_value_t *value)
{
    if (!value->is_real)
        return value->integer;
    if (value->real >= -9.2e18 && value->real <= 9.2e18)
        return (int64_t) value->real;
    return 0;
}

double
fh_metric_value_real (const fh_metric_value_t *value)
{
    return value->is_real ? value->real : (double) value->integer;
}

fh_metrics_snapshot_t *
fh_metrics_snapshot_new (void)
{
    return calloc (1, sizeof (fh_metrics_snapshot_t));
}

static void
s_item_free (fh_metrics_item_t *item)
{
    free (item->name);
    free (item->text);
    free (item->error);
    free (item->version);
    free (item->publish);
    free (item->bound);
    free (item->busy);
}

void
fh_metrics_snapshot_destroy (fh_metrics_snapshot_t **self_p)
{
    fh_metrics_snapshot_t *self = *self_p;
    if (!self)
        return;
    s_item_free (&self->hub);
    for (size_t i = 0; i < self->reason_count; i++)
        free (self->reasons[i].name);
    free (self->reasons);
    for (size_t i = 0; i < self->endpoint_count; i++)
        s_item_free (&self->endpoints[i]);
    free (self->endpoints);
    for (size_t i = 0; i < self->consumer_count; i++)
        s_item_free (&self->consumers[i]);
    free (self->consumers);
    free (self);
    *self_p = NULL;
}

/* Grows an array of items by count zeroed ones; the first new one, or NULL. */
static fh_metrics_item_t *
s_add_items (fh_metrics_item_t **items, size_t *used, size_t count)
{
    if (count > SIZE_MAX / sizeof **items - *used)
        return NULL;
    fh_metrics_item_t *grown = realloc (*items, (*used + count) * sizeof **items);
    if (!grown)
        return NULL;
    *items = grown;
    memset (grown + *used, 0, count * sizeof *grown);
    fh_metrics_item_t *first = grown + *used;
    *used += count;
    return first;
}

fh_metrics_item_t *
fh_metrics_add_endpoints (fh_metrics_snapshot_t *self, size_t count)
{
    return s_add_items (&self->endpoints, &self->endpoint_count, count);
}

fh_metrics_item_t *
fh_metrics_add_consumers (fh_metrics_snapshot_t *self, size_t count)
{
    return s_add_items (&self->consumers, &self->consumer_count, count);
}

int
fh_metrics_set_text (char **slot, const char *text)
{
    char *copy = text ? strdup (text) : NULL;
    if (text && !copy)
        return -1;
    free (*slot);
    *slot = copy;
    return 0;
}

int
fh_metrics_add_reason (fh_metrics_snapshot_t *self, const char *name, fh_metric_value_t value)
{
    fh_metrics_reason_t *grown = realloc (self->reasons, (self->reason_count + 1) * sizeof *grown);
    if (!grown)
        return -1;
    self->reasons = grown;
    char *copy = strdup (name);
    if (!copy)
        return -1;
    grown[self->reason_count++] = (fh_metrics_reason_t){copy, value};
    return 0;
}

void
fh_metrics_set_int (fh_metrics_item_t *item, fh_metric_id_t id, int64_t value)
{
    if (fh_metrics[id].real)
        item->values[id] = (fh_metric_value_t){.is_real = true, .real = (double) value};
    else
        item->values[id] = (fh_metric_value_t){.integer = value};
}

void
fh_metrics_set_real (fh_metrics_item_t *item, fh_metric_id_t id, double value)
{
    item->values[id] = (fh_metric_value_t){.is_real = true, .real = value};
}

fh_metrics_latency_t *
fh_metrics_latency (fh_metrics_item_t *item, fh_metric_id_t id)
{
    return &item->latency[id == FH_M_PROCESSING ? 1 : 0];
}

void
fh_metrics_latency_set (fh_metrics_latency_t *latency, const fh_histogram_snapshot_t *run,
                        const fh_histogram_snapshot_t *interval)
{
    fh_histogram_summarize (run, &latency->run);
    if (interval)
        fh_histogram_summarize (interval, &latency->interval);
    else
        memset (&latency->interval, 0, sizeof latency->interval);
    /* Cumulative: every bucket that ends at or below the bound. */
    uint64_t seen = 0;
    unsigned bucket = 0;
    for (size_t i = 0; i < FH_METRICS_BUCKETS; i++) {
        unsigned end = fh_histogram_bucket (UINT64_C (1) << (i + FH_METRICS_BUCKET_FIRST_LOG2));
        for (; bucket < end; bucket++)
            seen += run->buckets[bucket];
        latency->le[i] = seen;
    }
}
