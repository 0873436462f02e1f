/*  test_stats_format - a STATS snapshot as Prometheus text and collectd
    lines (hub/metrics/stats_format.c); the table is test_stats_table.c.

    Outputs of valid snapshots are compared line by line with the exact
    expected text; broken snapshots (the input comes over a socket) must
    give some output and never crash, which the ASan build checks.
*/
#include "stats_format.h"
#include "stats_table.h"

#include "metrics.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stats_kit.h"

/* ---- Checking Prometheus text ------------------------------------------- */

/* The Prometheus lines of a histogram, appended to text (of size bytes):
   the bounds 2^8..2^35 ns (and +Inf), whose cumulative counts are those of
   s_histogram_buckets when with_buckets, else 0; then _sum and _count.
   labels is "" or 'consumer="NAME",'. */
static void
s_append_histogram (char *text, size_t size, const char *family, const char *labels, int count,
                    const char *sum, bool with_buckets)
{
    for (int i = 0; i <= FH_METRICS_BUCKETS; i++) {
        char le[32];
        if (i < FH_METRICS_BUCKETS)
            fh_metrics_bucket_text ((size_t) i, le, sizeof le);
        else
            snprintf (le, sizeof le, "+Inf");
        int log2 = i + FH_METRICS_BUCKET_FIRST_LOG2, cumulative = 0;
        if (i == FH_METRICS_BUCKETS)
            cumulative = count;
        else if (with_buckets)
            cumulative = log2 >= 22   ? count - 10
                         : log2 >= 20 ? count * 7 / 10
                         : log2 >= 19 ? count / 5
                                      : 0;
        size_t used = strlen (text);
        snprintf (text + used, size - used, "%s_bucket{%sle=\"%s\"} %d\n", family, labels, le,
                  cumulative);
    }
    size_t used = strlen (text);
    char bare[128];
    snprintf (bare, sizeof bare, "%.*s", (int) (strlen (labels) ? strlen (labels) - 1 : 0), labels);
    snprintf (text + used, size - used, "%s_sum%s%s%s %s\n%s_count%s%s%s %d\n", family,
              *bare ? "{" : "", bare, *bare ? "}" : "", sum, family, *bare ? "{" : "", bare,
              *bare ? "}" : "", count);
}

/* Checks text against the lines of expected (one string). Frees text. */

static void
s_assert_text (char *text, const char *expected)
{
    char *copy = strdup (expected);
    assert_non_null (copy);
    const char *lines[512];
    size_t count = 0;
    for (char *line = copy; *line; count++) {
        assert_true (count < 512);
        char *end = strchr (line, '\n');
        assert_non_null (end);
        *end = '\0';
        lines[count] = line;
        line = end + 1;
    }
    s_assert_lines (text, lines, count);
    free (copy);
}

/* Prometheus text whose families are each named once by HELP and TYPE
   and have all their samples together, right after those lines. */
static void
s_assert_grouped (const char *text)
{
    char family[256] = "";
    char seen[8192] = " ";
    bool histogram = false;
    const char *line = text;
    while (*line) {
        const char *end = strchr (line, '\n');
        assert_non_null (end);
        size_t len = (size_t) (end - line);
        assert_true (len > 0 && len < 4096);
        char copy[4096];
        memcpy (copy, line, len);
        copy[len] = '\0';
        char name[256], type[32];
        if (sscanf (copy, "# HELP %255s ", name) == 1) {
            /* A new family: never seen before. */
            char key[260];
            snprintf (key, sizeof key, " %s ", name);
            if (strstr (seen, key))
                fail_msg ("family %s named twice", name);
            assert_true (strlen (seen) + strlen (key) < sizeof seen);
            strcat (seen, key + 1);
            snprintf (family, sizeof family, "%s", name);
        }
        else if (sscanf (copy, "# TYPE %255s %31s", name, type) == 2) {
            assert_string_equal (name, family);
            histogram = strcmp (type, "histogram") == 0;
        }
        else {
            size_t name_len = strcspn (copy, "{ ");
            assert_true (name_len > 0 && name_len < sizeof name);
            memcpy (name, copy, name_len);
            name[name_len] = '\0';
            bool ok = strcmp (name, family) == 0;
            if (histogram && !ok && strncmp (name, family, strlen (family)) == 0)
                ok = strcmp (name + strlen (family), "_bucket") == 0
                     || strcmp (name + strlen (family), "_sum") == 0
                     || strcmp (name + strlen (family), "_count") == 0;
            if (!ok)
                fail_msg ("sample %s outside its family (in %s)", copy, family);
        }
        line = end + 1;
    }
}

/* ---- Prometheus ---------------------------------------------------------- */

static void
test_prometheus_one_consumer (void **state)
{
    (void) state;
    json_t *stats = s_snapshot (json_string ("buildsys"));
    static const char *const expected[] = {
        "# HELP fanhub_info Constant 1, labelled with the hub's version and configured name.",
        "# TYPE fanhub_info gauge",
        "fanhub_info{version=\"0.1.0\",name=\"buildsys\"} 1",
        "# HELP fanhub_uptime_seconds Seconds since the hub started.",
        "# TYPE fanhub_uptime_seconds gauge",
        "fanhub_uptime_seconds 12.5",
        "# HELP fanhub_received_total Bus messages read, malformed ones included.",
        "# TYPE fanhub_received_total counter",
        "fanhub_received_total 1000",
        "# HELP fanhub_malformed_total Bus messages dropped as malformed, by reason.",
        "# TYPE fanhub_malformed_total counter",
        "fanhub_malformed_total{reason=\"no_body\"} 1",
        "fanhub_malformed_total{reason=\"too_many_frames\"} 0",
        "fanhub_malformed_total{reason=\"too_large\"} 2",
        "fanhub_malformed_total{reason=\"topic_not_utf8\"} 0",
        "# HELP fanhub_unrouted_total Well-formed bus messages that matched no consumer.",
        "# TYPE fanhub_unrouted_total counter",
        "fanhub_unrouted_total 5",
        "# HELP fanhub_auth_denied_total Bus handshakes refused by the ZAP handler "
        "(docs/security.md).",
        "# TYPE fanhub_auth_denied_total counter",
        "fanhub_auth_denied_total 0",
        "# HELP fanhub_peers_refused_total Connections to a bus.bind endpoint dropped at once: it "
        "had bus.max_peers already, or the hub had no descriptor left for them.",
        "# TYPE fanhub_peers_refused_total counter",
        "fanhub_peers_refused_total 0",
        "# HELP fanhub_control_refused_total Control socket connections dropped: as many clients "
        "as the descriptors allow.",
        "# TYPE fanhub_control_refused_total counter",
        "fanhub_control_refused_total 0",
        "# HELP fanhub_http_refused_total /metrics connections dropped: 64 open already.",
        "# TYPE fanhub_http_refused_total counter",
        "fanhub_http_refused_total 0",
        "# HELP fanhub_control_unanswered_total Control answers not sent: the client's pipe was "
        "full, or it was gone.",
        "# TYPE fanhub_control_unanswered_total counter",
        "fanhub_control_unanswered_total 0",
        "# HELP fanhub_alloc_failures_total Allocations that failed on the hub's paths; what "
        "needed them was dropped and counted.",
        "# TYPE fanhub_alloc_failures_total counter",
        "fanhub_alloc_failures_total 0",
        "# HELP fanhub_draining_instances Consumer instances a reload replaced or removed that "
        "still consume what they hold.",
        "# TYPE fanhub_draining_instances gauge",
        "fanhub_draining_instances 0",
        "# HELP fanhub_draining_backlog Messages those draining instances still hold, queue and "
        "spool.",
        "# TYPE fanhub_draining_backlog gauge",
        "fanhub_draining_backlog 0",
        "# HELP fanhub_config_last_reload_successful 0 when the last reload was refused, else 1 "
        "(also before any reload).",
        "# TYPE fanhub_config_last_reload_successful gauge",
        "fanhub_config_last_reload_successful 1",
        "# HELP fanhub_endpoint_connected 1 while at least one peer is connected on the bus "
        "endpoint, else 0.",
        "# TYPE fanhub_endpoint_connected gauge",
        "fanhub_endpoint_connected{endpoint=\"tcp://127.0.0.1:9940\",kind=\"connect\"} 1",
        "# HELP fanhub_endpoint_since_timestamp_seconds Unix time the bus endpoint last became "
        "connected or not (or the hub started).",
        "# TYPE fanhub_endpoint_since_timestamp_seconds gauge",
        "fanhub_endpoint_since_timestamp_seconds{endpoint=\"tcp://"
        "127.0.0.1:9940\",kind=\"connect\"} 0",
        "# HELP fanhub_endpoint_handshake_failures_total ZMTP handshakes on the bus endpoint that "
        "failed (mechanism, key, ZAP, hang-up).",
        "# TYPE fanhub_endpoint_handshake_failures_total counter",
        "fanhub_endpoint_handshake_failures_total{endpoint=\"tcp://"
        "127.0.0.1:9940\",kind=\"connect\"} 0",
        "# HELP fanhub_consumer_info Constant 1, labelled with the consumer, its plugin and the "
        "plugin's version.",
        "# TYPE fanhub_consumer_info gauge",
        "fanhub_consumer_info{consumer=\"archive\",plugin=\"log\",version=\"1.0\"} 1",
        "# HELP fanhub_consumer_enqueued_total Messages put on the consumer's queue (or its "
        "spool).",
        "# TYPE fanhub_consumer_enqueued_total counter",
        "fanhub_consumer_enqueued_total{consumer=\"archive\"} 992",
        "# HELP fanhub_consumer_dequeued_total Messages taken off the consumer's queue to be "
        "consumed.",
        "# TYPE fanhub_consumer_dequeued_total counter",
        "fanhub_consumer_dequeued_total{consumer=\"archive\"} 990",
        "# HELP fanhub_consumer_completed_total Messages the consumer's plugin finished with ok.",
        "# TYPE fanhub_consumer_completed_total counter",
        "fanhub_consumer_completed_total{consumer=\"archive\"} 985",
        "# HELP fanhub_consumer_failed_total Messages that failed for good: the plugin answered "
        "fail, or retries ran out.",
        "# TYPE fanhub_consumer_failed_total counter",
        "fanhub_consumer_failed_total{consumer=\"archive\"} 4",
        "# HELP fanhub_consumer_retried_total Times a message was tried again after the plugin "
        "answered retry.",
        "# TYPE fanhub_consumer_retried_total counter",
        "fanhub_consumer_retried_total{consumer=\"archive\"} 7",
        "# HELP fanhub_consumer_dropped_total Messages dropped by the overflow policy of the "
        "consumer's full queue.",
        "# TYPE fanhub_consumer_dropped_total counter",
        "fanhub_consumer_dropped_total{consumer=\"archive\"} 0",
        "# HELP fanhub_consumer_spilled_total Messages written to the consumer's disk spool.",
        "# TYPE fanhub_consumer_spilled_total counter",
        "fanhub_consumer_spilled_total{consumer=\"archive\"} 0",
        "# HELP fanhub_consumer_dead_lettered_total Messages sent to the consumer's dead-letter "
        "store.",
        "# TYPE fanhub_consumer_dead_lettered_total counter",
        "fanhub_consumer_dead_lettered_total{consumer=\"archive\"} 3",
        "# HELP fanhub_consumer_dead_letter_errors_total Failed messages the consumer's "
        "dead-letter store could not keep (a full disk, an I/O error): lost.",
        "# TYPE fanhub_consumer_dead_letter_errors_total counter",
        "fanhub_consumer_dead_letter_errors_total{consumer=\"archive\"} 0",
        "# HELP fanhub_consumer_coalesced_total Messages merged into one already queued instead of "
        "being consumed on their own.",
        "# TYPE fanhub_consumer_coalesced_total counter",
        "fanhub_consumer_coalesced_total{consumer=\"archive\"} 0",
        "# HELP fanhub_consumer_backlog Messages waiting for the consumer: enqueued - dequeued, "
        "spool included.",
        "# TYPE fanhub_consumer_backlog gauge",
        "fanhub_consumer_backlog{consumer=\"archive\"} 2",
        "# HELP fanhub_consumer_in_flight Messages being consumed now: dequeued - completed - "
        "failed.",
        "# TYPE fanhub_consumer_in_flight gauge",
        "fanhub_consumer_in_flight{consumer=\"archive\"} 1",
        "# HELP fanhub_consumer_backlog_max Highest backlog since the hub started.",
        "# TYPE fanhub_consumer_backlog_max gauge",
        "fanhub_consumer_backlog_max{consumer=\"archive\"} 120",
        "# HELP fanhub_consumer_capacity Messages the consumer's queue holds before its overflow "
        "policy applies.",
        "# TYPE fanhub_consumer_capacity gauge",
        "fanhub_consumer_capacity{consumer=\"archive\"} 100000",
        "# HELP fanhub_consumer_warn_at queue.warn_at: the backlog at which the hub warns; 0 when "
        "it never does.",
        "# TYPE fanhub_consumer_warn_at gauge",
        "fanhub_consumer_warn_at{consumer=\"archive\"} 1000",
        "# HELP fanhub_consumer_stuck Consume calls running now for longer than the stuck "
        "threshold.",
        "# TYPE fanhub_consumer_stuck gauge",
        "fanhub_consumer_stuck{consumer=\"archive\"} 0",
        "# HELP fanhub_consumer_evicted_total Accepted messages dropped later (also in dropped): "
        "drop-oldest evictions, spilled messages the spool could not store.",
        "# TYPE fanhub_consumer_evicted_total counter",
        "fanhub_consumer_evicted_total{consumer=\"archive\"} 1",
        "# HELP fanhub_consumer_spool_bytes Bytes of spooled messages not yet consumed.",
        "# TYPE fanhub_consumer_spool_bytes gauge",
        "fanhub_consumer_spool_bytes{consumer=\"archive\"} 4096",
        "# HELP fanhub_consumer_spool_max_bytes queue.spool_max_bytes: the most bytes the spool "
        "may hold; 0 when unlimited.",
        "# TYPE fanhub_consumer_spool_max_bytes gauge",
        "fanhub_consumer_spool_max_bytes{consumer=\"archive\"} 0",
        "# HELP fanhub_consumer_spool_corrupt_total Damaged spool records or regions skipped.",
        "# TYPE fanhub_consumer_spool_corrupt_total counter",
        "fanhub_consumer_spool_corrupt_total{consumer=\"archive\"} 6",
        "# HELP fanhub_consumer_spool_cursor_errors_total Spool cursor writes that failed (each is "
        "tried again).",
        "# TYPE fanhub_consumer_spool_cursor_errors_total counter",
        "fanhub_consumer_spool_cursor_errors_total{consumer=\"archive\"} 7",
        "# HELP fanhub_consumer_spool_lost_total Spooled records lost: segments missing or cut "
        "short, a removed spool directory.",
        "# TYPE fanhub_consumer_spool_lost_total counter",
        "fanhub_consumer_spool_lost_total{consumer=\"archive\"} 10",
        "# HELP fanhub_consumer_spool_fsyncs_total fdatasync calls on the spool's segments (one "
        "per group commit with fsync: always).",
        "# TYPE fanhub_consumer_spool_fsyncs_total counter",
        "fanhub_consumer_spool_fsyncs_total{consumer=\"archive\"} 8",
        "# HELP fanhub_consumer_spool_handoff Spilled messages handed to the spool's writer thread "
        "and not yet written.",
        "# TYPE fanhub_consumer_spool_handoff gauge",
        "fanhub_consumer_spool_handoff{consumer=\"archive\"} 9",
        "# HELP fanhub_consumer_spool_messages Messages of the backlog written to the spool "
        "and not yet read back.",
        "# TYPE fanhub_consumer_spool_messages gauge",
        "fanhub_consumer_spool_messages{consumer=\"archive\"} 11",
        "# HELP fanhub_consumer_keys_active Pool: keys with a message queued, running or waiting "
        "for a retry.",
        "# TYPE fanhub_consumer_keys_active gauge",
        "fanhub_consumer_keys_active{consumer=\"archive\"} 3",
        "# HELP fanhub_consumer_key_backlog_max Pool: the most messages one key has had queued at "
        "once.",
        "# TYPE fanhub_consumer_key_backlog_max gauge",
        "fanhub_consumer_key_backlog_max{consumer=\"archive\"} 5",
        "# HELP fanhub_consumer_key_fallback_total Pool: messages whose order_by key could not be "
        "read, given the fallback key.",
        "# TYPE fanhub_consumer_key_fallback_total counter",
        "fanhub_consumer_key_fallback_total{consumer=\"archive\"} 2",
        "# HELP fanhub_consumer_restarts_total Worker processes the consumer's plugin started "
        "again after one ended (ABI 1.3).",
        "# TYPE fanhub_consumer_restarts_total counter",
        "fanhub_consumer_restarts_total{consumer=\"archive\"} 0",
        "# HELP fanhub_consumer_skipped_total Messages done without being processed (a worker's "
        "DROP answer).",
        "# TYPE fanhub_consumer_skipped_total counter",
        "fanhub_consumer_skipped_total{consumer=\"archive\"} 0",
        "# HELP fanhub_consumer_published_total Messages the consumer's plugin published, "
        "accepted for its publish: endpoints (ABI 1.5).",
        "# TYPE fanhub_consumer_published_total counter",
        "fanhub_consumer_published_total{consumer=\"archive\"} 0",
        "# HELP fanhub_consumer_publish_failed_total Messages the consumer's plugin published "
        "that were dropped: no publish:, a full queue, a body that is not JSON with envelope: "
        "fedmsg.",
        "# TYPE fanhub_consumer_publish_failed_total counter",
        "fanhub_consumer_publish_failed_total{consumer=\"archive\"} 0",
        "# HELP fanhub_consumer_state What the plugin says it is doing: 0 up, 1 down, 2 halted "
        "(ABI 1.3); 3 paused (fanhub pause).",
        "# TYPE fanhub_consumer_state gauge",
        "fanhub_consumer_state{consumer=\"archive\"} 0",
        "# HELP fanhub_consumer_tickets_expired_total PENDING answers not completed within "
        "consume_timeout: the attempt failed (retried).",
        "# TYPE fanhub_consumer_tickets_expired_total counter",
        "fanhub_consumer_tickets_expired_total{consumer=\"archive\"} 0",
        "# HELP fanhub_consumer_completions_late_total host->complete calls for a ticket no longer "
        "open (expired, abandoned, done): ignored.",
        "# TYPE fanhub_consumer_completions_late_total counter",
        "fanhub_consumer_completions_late_total{consumer=\"archive\"} 0",
        "# HELP fanhub_consumer_tickets_abandoned_total PENDING messages given up when a reload or "
        "stop stopped waiting: not done.",
        "# TYPE fanhub_consumer_tickets_abandoned_total counter",
        "fanhub_consumer_tickets_abandoned_total{consumer=\"archive\"} 0",
        "# HELP fanhub_consumer_queue_bytes Payload bytes the consumer holds in memory, not yet "
        "started.",
        "# TYPE fanhub_consumer_queue_bytes gauge",
        "fanhub_consumer_queue_bytes{consumer=\"archive\"} 0",
    };
    char want[20000] = "";
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        snprintf (want + strlen (want), sizeof want - strlen (want), "%s\n", expected[i]);
    snprintf (want + strlen (want), sizeof want - strlen (want), "%s",
              "# HELP fanhub_consumer_queue_wait_seconds Time from the hub receiving a message to "
              "the consumer starting on it, since start.\n"
              "# TYPE fanhub_consumer_queue_wait_seconds histogram\n");
    s_append_histogram (want, sizeof want, "fanhub_consumer_queue_wait_seconds",
                        "consumer=\"archive\",", 990, "1.25", true);
    snprintf (want + strlen (want), sizeof want - strlen (want), "%s",
              "# HELP fanhub_consumer_processing_seconds Time the consumer's plugin took for a "
              "message, since start.\n"
              "# TYPE fanhub_consumer_processing_seconds histogram\n");
    s_append_histogram (want, sizeof want, "fanhub_consumer_processing_seconds",
                        "consumer=\"archive\",", 985, "3.5", false);
    snprintf (
        want + strlen (want), sizeof want - strlen (want), "%s",
        "# HELP fanhub_consumer_queue_wait_max_seconds Longest queue wait since the hub started.\n"
        "# TYPE fanhub_consumer_queue_wait_max_seconds gauge\n"
        "fanhub_consumer_queue_wait_max_seconds{consumer=\"archive\"} 0.0052\n"
        "# HELP fanhub_consumer_processing_max_seconds Longest processing time since the hub "
        "started.\n"
        "# TYPE fanhub_consumer_processing_max_seconds gauge\n"
        "fanhub_consumer_processing_max_seconds{consumer=\"archive\"} 0.021\n");
    s_assert_text (fh_stats_format_prometheus (stats), want);
    /* The same snapshot, the same text. */
    char *once = fh_stats_format_prometheus (stats);
    char *twice = fh_stats_format_prometheus (stats);
    assert_non_null (once);
    assert_non_null (twice);
    assert_string_equal (once, twice);
    s_assert_grouped (once);
    free (once);
    free (twice);
    json_decref (stats);
}

/* Completion and upstream gaps: hub-wide families, written when the
   snapshot has them (upstream only with bus.gap_detection), between the
   hub's counters and its endpoints. */
static void
test_prometheus_completion_and_upstream (void **state)
{
    (void) state;
    json_t *stats = s_snapshot (json_string ("buildsys"));
    json_t *hub = json_object_get (stats, "hub");
    const figures_t e2e = {990, 2.1, 0.00212, 0.0011, 0.003, 0.006, 0.0071, 0.0072};
    assert_int_equal (json_object_set_new (hub, "handled", json_integer (990)), 0);
    assert_int_equal (json_object_set_new (hub, "end_to_end", s_figures (&e2e)), 0);
    assert_int_equal (json_object_set_new (hub, "upstream",
                                           json_pack ("{s:i, s:i, s:i, s:i}", "lost", 3, "restarts",
                                                      4, "untracked", 1, "producers", 2)),
                      0);
    char block[8192]
        = "fanhub_unrouted_total 5\n"
          "# HELP fanhub_auth_denied_total Bus handshakes refused by the ZAP handler"
          " (docs/security.md).\n"
          "# TYPE fanhub_auth_denied_total counter\n"
          "fanhub_auth_denied_total 0\n"
          "# HELP fanhub_peers_refused_total Connections to a bus.bind endpoint dropped at once: it"
          " had bus.max_peers already, or the hub had no descriptor left for them.\n"
          "# TYPE fanhub_peers_refused_total counter\n"
          "fanhub_peers_refused_total 0\n"
          "# HELP fanhub_control_refused_total Control socket connections dropped: as many clients"
          " as the descriptors allow.\n"
          "# TYPE fanhub_control_refused_total counter\n"
          "fanhub_control_refused_total 0\n"
          "# HELP fanhub_http_refused_total /metrics connections dropped: 64 open already.\n"
          "# TYPE fanhub_http_refused_total counter\n"
          "fanhub_http_refused_total 0\n"
          "# HELP fanhub_control_unanswered_total Control answers not sent: the client's pipe was"
          " full, or it was gone.\n"
          "# TYPE fanhub_control_unanswered_total counter\n"
          "fanhub_control_unanswered_total 0\n"
          "# HELP fanhub_alloc_failures_total Allocations that failed on the hub's paths; what"
          " needed them was dropped and counted.\n"
          "# TYPE fanhub_alloc_failures_total counter\n"
          "fanhub_alloc_failures_total 0\n"
          "# HELP fanhub_handled_total Messages every consumer they went to is done with.\n"
          "# TYPE fanhub_handled_total counter\n"
          "fanhub_handled_total 990\n"
          "# HELP fanhub_end_to_end_seconds Time from the hub receiving a message to it being"
          " handled, since start.\n"
          "# TYPE fanhub_end_to_end_seconds histogram\n";
    s_append_histogram (block, sizeof block, "fanhub_end_to_end_seconds", "", 990, "2.1", false);
    snprintf (
        block + strlen (block), sizeof block - strlen (block), "%s",
        "# HELP fanhub_end_to_end_max_seconds Longest time to handled since the hub started.\n"
        "# TYPE fanhub_end_to_end_max_seconds gauge\n"
        "fanhub_end_to_end_max_seconds 0.0072\n"
        "# HELP fanhub_draining_instances Consumer instances a reload replaced or removed that"
        " still consume what they hold.\n"
        "# TYPE fanhub_draining_instances gauge\n"
        "fanhub_draining_instances 0\n"
        "# HELP fanhub_draining_backlog Messages those draining instances still hold, queue and"
        " spool.\n"
        "# TYPE fanhub_draining_backlog gauge\n"
        "fanhub_draining_backlog 0\n"
        "# HELP fanhub_config_last_reload_successful 0 when the last reload was refused, else 1"
        " (also before any reload).\n"
        "# TYPE fanhub_config_last_reload_successful gauge\n"
        "fanhub_config_last_reload_successful 1\n"
        "# HELP fanhub_upstream_lost_total Sequence numbers a producer skipped: messages lost"
        " before the hub.\n"
        "# TYPE fanhub_upstream_lost_total counter\n"
        "fanhub_upstream_lost_total 3\n"
        "# HELP fanhub_upstream_restarts_total Times a producer's sequence went back (a restart,"
        " or out of order).\n"
        "# TYPE fanhub_upstream_restarts_total counter\n"
        "fanhub_upstream_restarts_total 4\n"
        "# HELP fanhub_upstream_untracked_total Messages without a usable sequence or producer,"
        " or beyond max_producers.\n"
        "# TYPE fanhub_upstream_untracked_total counter\n"
        "fanhub_upstream_untracked_total 1\n"
        "# HELP fanhub_upstream_producers Producers tracked.\n"
        "# TYPE fanhub_upstream_producers gauge\n"
        "fanhub_upstream_producers 2\n"
        "# HELP fanhub_endpoint_connected ");
    char *text = fh_stats_format_prometheus (stats);
    assert_non_null (text);
    if (!strstr (text, block))
        fail_msg ("the completion and upstream families are not as expected:\n%s", text);
    s_assert_grouped (text);
    free (text);
    json_decref (stats);
}

/* Several consumers: each family still has all its samples together, in
   the snapshot's order of consumers. */
static void
test_prometheus_families_grouped (void **state)
{
    (void) state;
    json_t *stats = s_snapshot (json_string ("buildsys"));
    const figures_t run = {3, 0.75, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25};
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf (name, sizeof name, "c%d", i);
        json_array_append_new (s_consumers (stats), s_consumer (name, s_histogram (&run, &s_none),
                                                                s_histogram (&s_none, &s_none)));
    }
    char *text = fh_stats_format_prometheus (stats);
    assert_non_null (text);
    s_assert_grouped (text);
    const char *archive = strstr (text, "fanhub_consumer_backlog{consumer=\"archive\"} 2\n");
    const char *c0 = strstr (text, "fanhub_consumer_backlog{consumer=\"c0\"} 2\n");
    const char *c2 = strstr (text, "fanhub_consumer_backlog{consumer=\"c2\"} 2\n");
    assert_non_null (archive);
    assert_true (archive < c0 && c0 < c2);
    /* A histogram without samples: every bucket, sum and count 0. */
    assert_non_null (strstr (
        text, "fanhub_consumer_processing_seconds_bucket{consumer=\"c1\",le=\"34.3597384\"} 0\n"
              "fanhub_consumer_processing_seconds_bucket{consumer=\"c1\",le=\"+Inf\"} 0\n"
              "fanhub_consumer_processing_seconds_sum{consumer=\"c1\"} 0\n"
              "fanhub_consumer_processing_seconds_count{consumer=\"c1\"} 0\n"));
    assert_non_null (strstr (text,
                             "fanhub_consumer_queue_wait_seconds_sum{consumer=\"c1\"} 0.75\n"
                             "fanhub_consumer_queue_wait_seconds_count{consumer=\"c1\"} 3\n"));
    assert_non_null (strstr (text, "fanhub_consumer_processing_max_seconds{consumer=\"c2\"} 0\n"));
    free (text);
    json_decref (stats);
}

/* Label values: backslash, double quote and newline escaped, the rest
   (UTF-8 included) as it is. */
static void
test_prometheus_label_escaping (void **state)
{
    (void) state;
    static const struct {
        const char *name;
        const char *label;
    } cases[] = {
        {"plain", "plain"},
        {"a\"b", "a\\\"b"},
        {"back\\slash", "back\\\\slash"},
        {"two\nlines", "two\\nlines"},
        {"\\\"\n", "\\\\\\\"\\n"},
        {"tab\there", "tab\there"},
        {"caf\xc3\xa9 {x=\"1\"}", "caf\xc3\xa9 {x=\\\"1\\\"}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *stats = s_snapshot (json_string (cases[i].name));
        json_t *consumer = json_array_get (s_consumers (stats), 0);
        json_object_set_new (consumer, "name", json_string (cases[i].name));
        json_t *endpoint
            = json_array_get (json_object_get (json_object_get (stats, "hub"), "endpoints"), 0);
        json_object_set_new (endpoint, "endpoint", json_string (cases[i].name));
        json_object_set_new (
            json_object_get (json_object_get (stats, "hub"), "malformed_by_reason"), cases[i].name,
            json_integer (9));
        char *text = fh_stats_format_prometheus (stats);
        assert_non_null (text);
        char want[512];
        snprintf (want, sizeof want, "\nfanhub_consumer_backlog{consumer=\"%s\"} 2\n",
                  cases[i].label);
        if (!strstr (text, want))
            fail_msg ("case %zu: no %s in:\n%s", i, want, text);
        snprintf (want, sizeof want, "\nfanhub_info{version=\"0.1.0\",name=\"%s\"} 1\n",
                  cases[i].label);
        assert_non_null (strstr (text, want));
        snprintf (want, sizeof want,
                  "\nfanhub_endpoint_connected{endpoint=\"%s\",kind=\"connect\"} 1\n",
                  cases[i].label);
        assert_non_null (strstr (text, want));
        snprintf (want, sizeof want, "\nfanhub_malformed_total{reason=\"%s\"} 9\n", cases[i].label);
        assert_non_null (strstr (text, want));
        snprintf (
            want, sizeof want,
            "\nfanhub_consumer_queue_wait_seconds_bucket{consumer=\"%s\",le=\"0.001048576\"} 693\n",
            cases[i].label);
        assert_non_null (strstr (text, want));
        s_assert_grouped (text);
        free (text);
        json_decref (stats);
    }
}

/* No name, no endpoints, no reasons, no consumers: the hub's families
   only, and an unlabelled malformed total. */
static void
test_prometheus_minimal_hub (void **state)
{
    (void) state;
    json_t *stats = json_pack ("{s:{s:n, s:s, s:f, s:i, s:i, s:i, s:[]}, s:[]}", "hub", "name",
                               "version", "0.1.0", "uptime", 0.25, "received", 0, "malformed", 4,
                               "unrouted", 0, "endpoints", "consumers");
    assert_non_null (stats);
    char *text = fh_stats_format_prometheus (stats);
    assert_non_null (text);
    assert_non_null (strstr (text, "\nfanhub_info{version=\"0.1.0\",name=\"\"} 1\n"));
    assert_non_null (strstr (text, "\nfanhub_uptime_seconds 0.25\n"));
    assert_non_null (strstr (text, "\nfanhub_malformed_total 4\n"));
    assert_null (strstr (text, "fanhub_endpoint_connected"));
    assert_null (strstr (text, "fanhub_consumer_"));
    s_assert_grouped (text);
    free (text);
    json_decref (stats);
}

/* ---- collectd ------------------------------------------------------------ */

static void
test_collectd_named_hub (void **state)
{
    (void) state;
    json_t *stats = s_snapshot (json_string ("buildsys"));
    static const char *const expected[] = {
        "PUTVAL \"myhost/fanhub-buildsys/uptime\" interval=10 N:12.5",
        "PUTVAL \"myhost/fanhub-buildsys/derive-received\" interval=10 N:1000",
        "PUTVAL \"myhost/fanhub-buildsys/derive-malformed\" interval=10 N:3",
        "PUTVAL \"myhost/fanhub-buildsys/derive-unrouted\" interval=10 N:5",
        "PUTVAL \"myhost/fanhub-buildsys/derive-auth_denied\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys/derive-peers_refused\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys/derive-control_refused\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys/derive-http_refused\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys/derive-control_unanswered\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys/derive-alloc_failures\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys/count-draining\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys/queue_length-draining\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys/bool-config_last_reload_successful\" interval=10 N:1",
        "PUTVAL \"myhost/fanhub-buildsys.endpoint_tcp_127.0.0.1_9940/bool-connected\" interval=10 "
        "N:1",
        "PUTVAL \"myhost/fanhub-buildsys.endpoint_tcp_127.0.0.1_9940/gauge-since\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.endpoint_tcp_127.0.0.1_9940/derive-handshake_failures\" "
        "interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-enqueued\" interval=10 N:992",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-dequeued\" interval=10 N:990",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-completed\" interval=10 N:985",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-failed\" interval=10 N:4",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-retried\" interval=10 N:7",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-dropped\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-spilled\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-dead_lettered\" interval=10 N:3",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-dead_letter_errors\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-coalesced\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/queue_length\" interval=10 N:2",
        "PUTVAL \"myhost/fanhub-buildsys.archive/count-in_flight\" interval=10 N:1",
        "PUTVAL \"myhost/fanhub-buildsys.archive/queue_length-max\" interval=10 N:120",
        "PUTVAL \"myhost/fanhub-buildsys.archive/queue_length-capacity\" interval=10 N:100000",
        "PUTVAL \"myhost/fanhub-buildsys.archive/queue_length-warn_at\" interval=10 N:1000",
        "PUTVAL \"myhost/fanhub-buildsys.archive/count-stuck\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-evicted\" interval=10 N:1",
        "PUTVAL \"myhost/fanhub-buildsys.archive/bytes-spool\" interval=10 N:4096",
        "PUTVAL \"myhost/fanhub-buildsys.archive/bytes-spool_max\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-spool_corrupt\" interval=10 N:6",
        "PUTVAL \"myhost/fanhub-buildsys.archive/errors-spool_cursor\" interval=10 N:7",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-spool_lost\" interval=10 N:10",
        "PUTVAL \"myhost/fanhub-buildsys.archive/operations-spool_fsync\" interval=10 N:8",
        "PUTVAL \"myhost/fanhub-buildsys.archive/queue_length-spool_handoff\" interval=10 N:9",
        "PUTVAL \"myhost/fanhub-buildsys.archive/queue_length-spool\" interval=10 N:11",
        "PUTVAL \"myhost/fanhub-buildsys.archive/count-keys_active\" interval=10 N:3",
        "PUTVAL \"myhost/fanhub-buildsys.archive/queue_length-key_max\" interval=10 N:5",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-key_fallback\" interval=10 N:2",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-restarts\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-skipped\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-published\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-publish_failed\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/gauge-state\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-tickets_expired\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-completions_late\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/derive-tickets_abandoned\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/bytes-queue\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/latency-queue_wait_p99\" interval=10 N:0.004",
        "PUTVAL \"myhost/fanhub-buildsys.archive/latency-queue_wait_mean\" interval=10 N:0.001",
        "PUTVAL \"myhost/fanhub-buildsys.archive/latency-processing_p99\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/latency-processing_mean\" interval=10 N:0",
        "PUTVAL \"myhost/fanhub-buildsys.archive/latency-queue_wait_max\" interval=10 N:0.0052",
        "PUTVAL \"myhost/fanhub-buildsys.archive/latency-processing_max\" interval=10 N:0.021",
    };
    ASSERT_LINES (fh_stats_format_collectd (stats, "myhost", 10.0, 0), expected);
    json_decref (stats);
}

static void
test_collectd_unnamed_hub (void **state)
{
    (void) state;
    json_t *stats = s_snapshot (json_null ());
    static const char *const expected[] = {
        "PUTVAL \"h/fanhub-hub/uptime\" interval=2.5 1700000000:12.5",
        "PUTVAL \"h/fanhub-hub/derive-received\" interval=2.5 1700000000:1000",
        "PUTVAL \"h/fanhub-hub/derive-malformed\" interval=2.5 1700000000:3",
        "PUTVAL \"h/fanhub-hub/derive-unrouted\" interval=2.5 1700000000:5",
        "PUTVAL \"h/fanhub-hub/derive-auth_denied\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-hub/derive-peers_refused\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-hub/derive-control_refused\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-hub/derive-http_refused\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-hub/derive-control_unanswered\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-hub/derive-alloc_failures\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-hub/count-draining\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-hub/queue_length-draining\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-hub/bool-config_last_reload_successful\" interval=2.5 1700000000:1",
        "PUTVAL \"h/fanhub-endpoint_tcp_127.0.0.1_9940/bool-connected\" interval=2.5 1700000000:1",
        "PUTVAL \"h/fanhub-endpoint_tcp_127.0.0.1_9940/gauge-since\" interval=2.5 1700000000:0",
        ("PUTVAL \"h/fanhub-endpoint_tcp_127.0.0.1_9940/derive-handshake_failures\" interval=2.5 "
         "1700000000:0"),
        "PUTVAL \"h/fanhub-archive/derive-enqueued\" interval=2.5 1700000000:992",
        "PUTVAL \"h/fanhub-archive/derive-dequeued\" interval=2.5 1700000000:990",
        "PUTVAL \"h/fanhub-archive/derive-completed\" interval=2.5 1700000000:985",
        "PUTVAL \"h/fanhub-archive/derive-failed\" interval=2.5 1700000000:4",
        "PUTVAL \"h/fanhub-archive/derive-retried\" interval=2.5 1700000000:7",
        "PUTVAL \"h/fanhub-archive/derive-dropped\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/derive-spilled\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/derive-dead_lettered\" interval=2.5 1700000000:3",
        "PUTVAL \"h/fanhub-archive/derive-dead_letter_errors\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/derive-coalesced\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/queue_length\" interval=2.5 1700000000:2",
        "PUTVAL \"h/fanhub-archive/count-in_flight\" interval=2.5 1700000000:1",
        "PUTVAL \"h/fanhub-archive/queue_length-max\" interval=2.5 1700000000:120",
        "PUTVAL \"h/fanhub-archive/queue_length-capacity\" interval=2.5 1700000000:100000",
        "PUTVAL \"h/fanhub-archive/queue_length-warn_at\" interval=2.5 1700000000:1000",
        "PUTVAL \"h/fanhub-archive/count-stuck\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/derive-evicted\" interval=2.5 1700000000:1",
        "PUTVAL \"h/fanhub-archive/bytes-spool\" interval=2.5 1700000000:4096",
        "PUTVAL \"h/fanhub-archive/bytes-spool_max\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/derive-spool_corrupt\" interval=2.5 1700000000:6",
        "PUTVAL \"h/fanhub-archive/errors-spool_cursor\" interval=2.5 1700000000:7",
        "PUTVAL \"h/fanhub-archive/derive-spool_lost\" interval=2.5 1700000000:10",
        "PUTVAL \"h/fanhub-archive/operations-spool_fsync\" interval=2.5 1700000000:8",
        "PUTVAL \"h/fanhub-archive/queue_length-spool_handoff\" interval=2.5 1700000000:9",
        "PUTVAL \"h/fanhub-archive/queue_length-spool\" interval=2.5 1700000000:11",
        "PUTVAL \"h/fanhub-archive/count-keys_active\" interval=2.5 1700000000:3",
        "PUTVAL \"h/fanhub-archive/queue_length-key_max\" interval=2.5 1700000000:5",
        "PUTVAL \"h/fanhub-archive/derive-key_fallback\" interval=2.5 1700000000:2",
        "PUTVAL \"h/fanhub-archive/derive-restarts\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/derive-skipped\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/derive-published\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/derive-publish_failed\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/gauge-state\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/derive-tickets_expired\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/derive-completions_late\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/derive-tickets_abandoned\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/bytes-queue\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/latency-queue_wait_p99\" interval=2.5 1700000000:0.004",
        "PUTVAL \"h/fanhub-archive/latency-queue_wait_mean\" interval=2.5 1700000000:0.001",
        "PUTVAL \"h/fanhub-archive/latency-processing_p99\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/latency-processing_mean\" interval=2.5 1700000000:0",
        "PUTVAL \"h/fanhub-archive/latency-queue_wait_max\" interval=2.5 1700000000:0.0052",
        "PUTVAL \"h/fanhub-archive/latency-processing_max\" interval=2.5 1700000000:0.021",
    };
    ASSERT_LINES (fh_stats_format_collectd (stats, "h", 2.5, 1700000000.0), expected);
    /* An empty name is no name either. */
    json_object_set_new (json_object_get (stats, "hub"), "name", json_string (""));
    ASSERT_LINES (fh_stats_format_collectd (stats, "h", 2.5, 1700000000.0), expected);
    json_decref (stats);
}

/* Names, host, interval and time as they end up in the identifier. */
static void
test_collectd_sanitising (void **state)
{
    (void) state;
    static const struct {
        const char *hub; /* NULL: no name */
        const char *consumer;
        const char *host; /* NULL allowed */
        double interval;
        double when;
        const char *first; /* the hub's first line */
        const char *queue; /* the consumer's first line */
    } cases[] = {
        {"build sys", "a/b \"c\"\\d", "my host/x", 10, 0,
         "PUTVAL \"my_host_x/fanhub-build_sys/uptime\" interval=10 N:12.5",
         "PUTVAL \"my_host_x/fanhub-build_sys.a_b__c__d/queue_length\" interval=10 N:2"},
        {NULL, "tab\tnew\nline\x7f", "", 60, 0,
         "PUTVAL \"localhost/fanhub-hub/uptime\" interval=60 N:12.5",
         "PUTVAL \"localhost/fanhub-tab_new_line_/queue_length\" interval=60 N:2"},
        {"hub-1.prod", "with-dash.dot", NULL, 0, 1700000000.25,
         "PUTVAL \"localhost/fanhub-hub-1.prod/uptime\" 1700000000.250:12.5",
         "PUTVAL \"localhost/fanhub-hub-1.prod.with-dash.dot/queue_length\" 1700000000.250:2"},
        {NULL, "caf\xc3\xa9", "h", 0.5, -3, "PUTVAL \"h/fanhub-hub/uptime\" interval=0.5 N:12.5",
         "PUTVAL \"h/fanhub-caf\xc3\xa9/queue_length\" interval=0.5 N:2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *stats = s_snapshot (cases[i].hub ? json_string (cases[i].hub) : json_null ());
        json_object_set_new (json_array_get (s_consumers (stats), 0), "name",
                             json_string (cases[i].consumer));
        char *text
            = fh_stats_format_collectd (stats, cases[i].host, cases[i].interval, cases[i].when);
        assert_non_null (text);
        size_t first = strlen (cases[i].first);
        if (strncmp (text, cases[i].first, first) != 0 || text[first] != '\n')
            fail_msg ("case %zu: got\n%s", i, text);
        char want[512];
        snprintf (want, sizeof want, "\n%s\n", cases[i].queue);
        if (!strstr (text, want))
            fail_msg ("case %zu: no %s in:\n%s", i, cases[i].queue, text);
        /* Every collectd row of the hub (13), the endpoint's (3) and the
           consumer's (two per latency), each one PUTVAL. */
        size_t lines = 0;
        for (const char *line = text; *line; line = strchr (line, '\n') + 1) {
            assert_int_equal (strncmp (line, "PUTVAL \"", 8), 0);
            lines++;
        }
        size_t consumer = 0;
        for (size_t id = 0; id < FH_METRIC_COUNT; id++)
            if (fh_metrics[id].scope == FH_SCOPE_CONSUMER && fh_metrics[id].collectd)
                consumer += fh_metrics[id].type == FH_METRIC_HISTOGRAM ? 2 : 1;
        assert_int_equal (lines, 13 + 3 + consumer);
        free (text);
        json_decref (stats);
    }
}

/* ---- Broken snapshots ---------------------------------------------------- */

/* Every formatter gives text of whole lines for anything at all. */
static void
s_assert_survives (const json_t *stats, const char *what)
{
    char *texts[] = {
        fh_stats_format_prometheus (stats),
        fh_stats_format_collectd (stats, "h", 10, 0),
        fh_stats_format_table (stats),
    };
    for (size_t i = 0; i < 3; i++) {
        if (!texts[i])
            fail_msg ("%s: formatter %zu gave NULL", what, i);
        size_t len = strlen (texts[i]);
        if (len > 0 && texts[i][len - 1] != '\n')
            fail_msg ("%s: formatter %zu: no final newline", what, i);
    }
    s_assert_grouped (texts[0]);
    for (const char *line = texts[1]; *line; line = strchr (line, '\n') + 1)
        assert_int_equal (strncmp (line, "PUTVAL \"h/fanhub-", 17), 0);
    for (size_t i = 0; i < 3; i++)
        free (texts[i]);
}

static void
test_broken_snapshots (void **state)
{
    (void) state;
    static const struct {
        const char *json;
        const char *prometheus; /* a line the Prometheus text has, or NULL */
        const char *collectd;   /* a line the collectd text has, or NULL */
    } cases[] = {
        {"{}", "\nfanhub_received_total 0\n",
         "PUTVAL \"h/fanhub-hub/derive-received\" interval=10 N:0\n"},
        {"[]", "\nfanhub_malformed_total 0\n", NULL},
        {"null", "fanhub_info{version=\"\",name=\"\"} 1\n", NULL},
        {"42", NULL, NULL},
        {"\"stats\"", NULL, NULL},
        {"{\"hub\": 5, \"consumers\": {}}", "\nfanhub_unrouted_total 0\n", NULL},
        {"{\"hub\": [], \"consumers\": \"archive\"}", NULL, NULL},
        {"{\"hub\": {\"name\": 7, \"version\": [], \"uptime\": \"long\", \"received\": \"1000\","
         " \"malformed\": {}, \"malformed_by_reason\": [1, 2], \"unrouted\": null,"
         " \"endpoints\": {\"a\": 1}}, \"consumers\": null}",
         "\nfanhub_received_total 0\n",
         "PUTVAL \"h/fanhub-hub/derive-malformed\" interval=10 N:0\n"},
        {"{\"hub\": {\"name\": \"\", \"endpoints\": [1, null, {\"endpoint\": 3},"
         " {\"endpoint\": \"tcp://x:1\", \"connected\": \"yes\", \"kind\": 9}],"
         " \"malformed_by_reason\": {\"no_body\": \"one\", \"x\": null, \"y\": 2.5}}}",
         "\nfanhub_endpoint_connected{endpoint=\"tcp://x:1\",kind=\"\"} 0\n", NULL},
        {"{\"hub\": {\"malformed_by_reason\": {\"no_body\": \"one\", \"y\": 2.5}}}",
         "\nfanhub_malformed_total{reason=\"no_body\"} 0\nfanhub_malformed_total{reason=\"y\"} "
         "2.5\n",
         NULL},
        {"{\"consumers\": [null, 1, \"x\", [], {}, {\"name\": \"\"}, {\"name\": 5},"
         " {\"name\": \"ok\", \"queue_wait\": 3, \"processing\": {\"interval\": \"x\", \"count\": "
         "\"many\"},"
         " \"backlog\": \"2\", \"enqueued\": 1e300, \"failed\": -1.5, \"completed\": true}]}",
         "\nfanhub_consumer_enqueued_total{consumer=\"ok\"} 1e+300\n",
         "PUTVAL \"h/fanhub-ok/derive-failed\" interval=10 N:-1\n"},
        {"{\"consumers\": [{\"name\": \"ok\", \"backlog\": 1e300}]}",
         "\nfanhub_consumer_processing_seconds_bucket{consumer=\"ok\",le=\"+Inf\"} 0\n",
         "PUTVAL \"h/fanhub-ok/queue_length\" interval=10 N:0\n"},
        {"{\"consumers\": [{\"name\": \"a\", \"queue_wait\": {\"count\": 5, \"p50\": \"x\", "
         "\"max\": [],"
         " \"interval\": {\"count\": 2, \"p99\": null, \"mean\": \"m\"}}}]}",
         "\nfanhub_consumer_queue_wait_seconds_bucket{consumer=\"a\",le=\"+Inf\"} 5\n",
         "PUTVAL \"h/fanhub-a/latency-queue_wait_p99\" interval=10 N:0\n"},
        {"{\"hub\": {\"received\": 9223372036854775807, \"uptime\": 1e308, \"name\": \"n\"},"
         " \"consumers\": [{\"name\": \"a\", \"queue_wait\": {\"interval\": {\"count\": 1, "
         "\"p99\": -2,"
         " \"mean\": 1e300}}}]}",
         "\nfanhub_received_total 9223372036854775807\n",
         "PUTVAL \"h/fanhub-n.a/latency-queue_wait_mean\" interval=10 N:1e+300\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_error_t error;
        json_t *stats = json_loads (cases[i].json, JSON_DECODE_ANY, &error);
        if (!stats)
            fail_msg ("case %zu: bad test JSON: %s", i, error.text);
        char what[32];
        snprintf (what, sizeof what, "case %zu", i);
        s_assert_survives (stats, what);
        if (cases[i].prometheus) {
            char *text = fh_stats_format_prometheus (stats);
            if (!strstr (text, cases[i].prometheus))
                fail_msg ("case %zu: no %s in:\n%s", i, cases[i].prometheus, text);
            free (text);
        }
        if (cases[i].collectd) {
            char *text = fh_stats_format_collectd (stats, "h", 10, 0);
            if (!strstr (text, cases[i].collectd))
                fail_msg ("case %zu: no %s in:\n%s", i, cases[i].collectd, text);
            free (text);
        }
        json_decref (stats);
    }
    s_assert_survives (NULL, "NULL");
}

/* A snapshot's consumers with no valid one give the hub's part only,
   exactly as for a snapshot without consumers. */
static void
test_unnamed_consumers_left_out (void **state)
{
    (void) state;
    json_t *none = s_snapshot (json_string ("buildsys"));
    json_array_clear (s_consumers (none));
    json_t *unnamed = s_snapshot (json_string ("buildsys"));
    json_object_del (json_array_get (s_consumers (unnamed), 0), "name");
    char *(*formats[]) (const json_t *) = {fh_stats_format_prometheus, fh_stats_format_table};
    for (size_t i = 0; i < 2; i++) {
        char *a = formats[i](none);
        char *b = formats[i](unnamed);
        assert_non_null (a);
        assert_non_null (b);
        assert_string_equal (a, b);
        free (a);
        free (b);
    }
    char *a = fh_stats_format_collectd (none, "h", 10, 0);
    char *b = fh_stats_format_collectd (unnamed, "h", 10, 0);
    assert_string_equal (a, b);
    free (a);
    free (b);
    json_decref (none);
    json_decref (unnamed);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_prometheus_one_consumer),
        cmocka_unit_test (test_prometheus_families_grouped),
        cmocka_unit_test (test_prometheus_completion_and_upstream),
        cmocka_unit_test (test_prometheus_label_escaping),
        cmocka_unit_test (test_prometheus_minimal_hub),
        cmocka_unit_test (test_collectd_named_hub),
        cmocka_unit_test (test_collectd_unnamed_hub),
        cmocka_unit_test (test_collectd_sanitising),
        cmocka_unit_test (test_broken_snapshots),
        cmocka_unit_test (test_unnamed_consumers_left_out),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
