/*  stats_kit - STATS snapshots built with jansson as the hub builds them
    (docs/stats-schema.md), and text checked line by line: what the tests
    of hub/metrics/stats_format.c and stats_table.c share. Include it once,
    in the test's .c file, after <cmocka.h>.
*/
#ifndef STATS_KIT_H_INCLUDED
#define STATS_KIT_H_INCLUDED

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Building snapshots -------------------------------------------------- */

typedef struct {
    int count;
    double sum, mean, p50, p90, p99, p999, max;
} figures_t;

static inline json_t *
s_figures (const figures_t *f)
{
    json_t *json = json_pack ("{s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "count", f->count, "sum",
                              f->sum, "mean", f->mean, "p50", f->p50, "p90", f->p90, "p99", f->p99,
                              "p999", f->p999, "max", f->max);
    assert_non_null (json);
    return json;
}

/* A histogram: whole-run figures plus the last interval's. */
static inline json_t *
s_histogram (const figures_t *run, const figures_t *interval)
{
    json_t *json = s_figures (run);
    assert_int_equal (json_object_set_new (json, "interval", s_figures (interval)), 0);
    return json;
}

/* The same with cumulative Prometheus buckets: a few bounds only, as
   {"LE": COUNT}; the formatter carries a count on to the bounds left out. */
static inline json_t *
s_histogram_buckets (const figures_t *run, const figures_t *interval)
{
    json_t *json = s_histogram (run, interval);
    json_t *buckets = json_pack ("{s:i, s:i, s:i}", "0.000524288", run->count / 5, "0.001048576",
                                 run->count * 7 / 10, "0.004194304", run->count - 10);
    assert_non_null (buckets);
    assert_int_equal (json_object_set_new (json, "buckets", buckets), 0);
    return json;
}

static const figures_t s_none = {0, 0, 0, 0, 0, 0, 0, 0};

/* A consumer with the counters of the schema's example. */
static inline json_t *
s_consumer (const char *name, json_t *queue_wait, json_t *processing)
{
    json_t *json = json_pack ("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i,"
                              " s:i, s:i, s:i, s:i, s:o, s:o}",
                              "name", name, "plugin", "log", "capacity", 100000, "enqueued", 992,
                              "dequeued", 990, "completed", 985, "failed", 4, "retried", 7,
                              "dropped", 0, "spilled", 0, "dead_lettered", 3, "coalesced", 0,
                              "backlog", 2, "in_flight", 1, "backlog_max", 120, "stuck", 0,
                              "queue_wait", queue_wait, "processing", processing);
    assert_non_null (json);
    /* The spool and pool figures, distinct so that a swapped field shows. */
    json_t *more = json_pack ("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s}",
                              "evicted", 1, "spool_bytes", 4096, "spool_corrupt", 6, "keys_active",
                              3, "key_backlog_max", 5, "key_fallback", 2, "spool_cursor_errors", 7,
                              "spool_fsyncs", 8, "spool_handoff", 9, "spool_lost", 10,
                              "spool_messages", 11, "warn_at", 1000, "plugin_version", "1.0");
    assert_non_null (more);
    assert_int_equal (json_object_update (json, more), 0);
    json_decref (more);
    return json;
}

/* The schema's example: hub "buildsys" and consumer "archive", whose
   processing had no sample in the last interval. */
static inline json_t *
s_snapshot (json_t *hub_name)
{
    const figures_t wait_run = {990, 1.25, 0.00126, 0.0009, 0.002, 0.004, 0.0051, 0.0052};
    const figures_t wait_interval = {100, 0.1, 0.001, 0.0009, 0.002, 0.004, 0.0051, 0.0052};
    const figures_t proc_run = {985, 3.5, 0.00355, 0.003, 0.006, 0.0123, 0.02, 0.021};
    json_t *consumers
        = json_pack ("[o]", s_consumer ("archive", s_histogram_buckets (&wait_run, &wait_interval),
                                        s_histogram (&proc_run, &s_none)));
    json_t *json = json_pack (
        "{s:{s:o, s:s, s:i, s:f, s:f, s:i, s:i,"
        "    s:{s:i, s:i, s:i, s:i}, s:i, s:[{s:s, s:s, s:b}]},"
        " s:o}",
        "hub", "name", hub_name, "version", "0.1.0", "pid", 1234, "uptime", 12.5, "interval", 10.0,
        "received", 1000, "malformed", 3, "malformed_by_reason", "no_body", 1, "too_many_frames", 0,
        "too_large", 2, "topic_not_utf8", 0, "unrouted", 5, "endpoints", "endpoint",
        "tcp://127.0.0.1:9940", "kind", "connect", "connected", 1, "consumers", consumers);
    assert_non_null (json);
    assert_int_equal (json_object_set_new (json_object_get (json, "hub"),
                                           "config_last_reload_successful", json_integer (1)),
                      0);
    return json;
}

/* The consumers array of a snapshot, to add to. */
static inline json_t *
s_consumers (json_t *snapshot)
{
    json_t *consumers = json_object_get (snapshot, "consumers");
    assert_true (json_is_array (consumers));
    return consumers;
}

/* ---- Checking text ------------------------------------------------------- */

/* Compares text with the expected lines, one by one, so a failure names
   the first line that differs. Frees text. */
static inline void
s_assert_lines (char *text, const char *const *expected, size_t count)
{
    assert_non_null (text);
    char *whole = strdup (text); /* for the message: the lines are cut below */
    assert_non_null (whole);
    char *rest = text;
    for (size_t i = 0; i < count; i++) {
        char *end = strchr (rest, '\n');
        if (!end)
            fail_msg ("line %zu missing, expected \"%s\"", i + 1, expected[i]);
        *end = '\0';
        if (strcmp (rest, expected[i]) != 0) {
            *end = '\n';
            fprintf (stderr, "whole text:\n%s\n", whole);
            fail_msg ("line %zu:\n  got      \"%.*s\"\n  expected \"%s\"", i + 1,
                      (int) (end - rest), rest, expected[i]);
        }
        rest = end + 1;
    }
    if (*rest)
        fail_msg ("unexpected text after line %zu: \"%s\"", count, rest);
    free (whole);
    free (text);
}

#define ASSERT_LINES(text, expected)                                                               \
    s_assert_lines ((text), (expected), sizeof (expected) / sizeof (expected)[0])

#endif
