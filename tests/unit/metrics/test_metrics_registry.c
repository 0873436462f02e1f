/*  test_metrics_registry - the registry (hub/metrics/metrics.c) is the one
    list of metrics: the Prometheus text, the collectd lines and the JSON
    snapshot name exactly its rows, a snapshot read back from its JSON
    gives the same texts, and every row is in docs/metrics.md with the
    same names, type and unit (and nothing else is).
*/
#include "metrics.h"
#include "stats_format.h"
#include "stats_table.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ---- A set of strings ---------------------------------------------------- */

typedef struct {
    char *items[512];
    size_t count;
} s_set_t;

static void
s_set_add (s_set_t *set, const char *item)
{
    for (size_t i = 0; i < set->count; i++)
        if (strcmp (set->items[i], item) == 0)
            return;
    assert_true (set->count < 512);
    set->items[set->count] = strdup (item);
    assert_non_null (set->items[set->count]);
    set->count++;
}

static bool
s_set_has (const s_set_t *set, const char *item)
{
    for (size_t i = 0; i < set->count; i++)
        if (strcmp (set->items[i], item) == 0)
            return true;
    return false;
}

/* Fails naming the first item in one set and not the other. */
static void
s_set_assert_equal (const s_set_t *got, const s_set_t *want, const char *what)
{
    for (size_t i = 0; i < got->count; i++)
        if (!s_set_has (want, got->items[i]))
            fail_msg ("%s: %s is not in the registry", what, got->items[i]);
    for (size_t i = 0; i < want->count; i++)
        if (!s_set_has (got, want->items[i]))
            fail_msg ("%s: %s of the registry is missing", what, want->items[i]);
}

static void
s_set_clear (s_set_t *set)
{
    for (size_t i = 0; i < set->count; i++)
        free (set->items[i]);
    set->count = 0;
}

/* ---- A snapshot with every part ------------------------------------------ */

static const char *
s_scope_prefix (fh_metric_scope_t scope)
{
    switch (scope) {
    case FH_SCOPE_HUB: return "hub.";
    case FH_SCOPE_UPSTREAM: return "hub.upstream.";
    case FH_SCOPE_AMQP: return "hub.amqp.";
    case FH_SCOPE_SIGNATURES: return "hub.signatures.";
    case FH_SCOPE_ENDPOINT: return "hub.endpoints[].";
    case FH_SCOPE_CONSUMER: return "consumers[].";
    case FH_SCOPE_PROCESS: return "process.";
    }
    return "?";
}

static fh_metrics_snapshot_t *
s_full_snapshot (void)
{
    fh_metrics_snapshot_t *self = fh_metrics_snapshot_new ();
    assert_non_null (self);
    assert_int_equal (fh_metrics_set_text (&self->hub.name, "hub1"), 0);
    assert_int_equal (fh_metrics_set_text (&self->hub.text, "0.1.0"), 0);
    self->has_handled = self->has_end_to_end = self->has_upstream = self->has_process = true;
    self->has_amqp = true;
    self->has_signatures = self->has_crl = true;
    for (size_t id = 0; id < FH_METRIC_COUNT; id++)
        fh_metrics_set_int (&self->hub, (fh_metric_id_t) id, (int64_t) id + 1);
    assert_int_equal (fh_metrics_add_reason (self, "no_body", (fh_metric_value_t){.integer = 2}),
                      0);
    fh_metrics_item_t *endpoint = fh_metrics_add_endpoints (self, 1);
    assert_non_null (endpoint);
    assert_int_equal (fh_metrics_set_text (&endpoint->name, "tcp://127.0.0.1:1"), 0);
    assert_int_equal (fh_metrics_set_text (&endpoint->text, "connect"), 0);
    fh_metrics_set_int (endpoint, FH_M_ENDPOINT_CONNECTED, 1);
    fh_metrics_set_int (endpoint, FH_M_ENDPOINT_PEERS, 1);
    fh_metrics_item_t *consumer = fh_metrics_add_consumers (self, 1);
    assert_non_null (consumer);
    assert_int_equal (fh_metrics_set_text (&consumer->name, "archive"), 0);
    assert_int_equal (fh_metrics_set_text (&consumer->text, "log"), 0);
    for (size_t id = 0; id < FH_METRIC_COUNT; id++)
        fh_metrics_set_int (consumer, (fh_metric_id_t) id, (int64_t) id * 10);
    /* Latencies from real histograms: 100 values of 1 us to 100 us. */
    fh_histogram_snapshot_t *histogram = calloc (1, sizeof *histogram);
    assert_non_null (histogram);
    for (uint64_t v = 1000; v <= 100000; v += 1000) {
        histogram->buckets[fh_histogram_bucket (v)]++;
        histogram->count++;
        histogram->sum_ns += v;
        histogram->max_ns = v;
    }
    fh_metrics_latency_set (fh_metrics_latency (consumer, FH_M_QUEUE_WAIT), histogram, histogram);
    fh_metrics_latency_set (fh_metrics_latency (consumer, FH_M_PROCESSING), histogram, NULL);
    fh_metrics_latency_set (fh_metrics_latency (&self->hub, FH_M_END_TO_END), histogram, NULL);
    free (histogram);
    consumer->busy = calloc (2, sizeof *consumer->busy);
    assert_non_null (consumer->busy);
    consumer->workers = 2;
    consumer->busy[1] = 0.5;
    return self;
}

/* ---- The rows themselves ------------------------------------------------- */

static void
test_rows_are_well_formed (void **state)
{
    (void) state;
    s_set_t names = {0}, paths = {0};
    for (size_t id = 0; id < FH_METRIC_COUNT; id++) {
        const fh_metric_t *row = &fh_metrics[id];
        assert_int_equal (row->id, id);
        assert_non_null (row->json);
        assert_non_null (row->unit);
        assert_non_null (row->help);
        assert_true (strlen (row->help) > 10 && !strchr (row->help, '\n'));
        char path[128];
        snprintf (path, sizeof path, "%s%s", s_scope_prefix (row->scope), row->json);
        if (s_set_has (&paths, path))
            fail_msg ("JSON key %s twice", path);
        s_set_add (&paths, path);
        if (row->of != row->id) /* a histogram's max: that histogram's key, then .max */
            assert_int_equal (fh_metrics[row->of].type, FH_METRIC_HISTOGRAM);
        if (!row->prometheus)
            continue;
        if (s_set_has (&names, row->prometheus))
            fail_msg ("Prometheus family %s twice", row->prometheus);
        s_set_add (&names, row->prometheus);
        size_t len = strlen (row->prometheus);
        bool total = len > 6 && strcmp (row->prometheus + len - 6, "_total") == 0;
        if ((row->type == FH_METRIC_COUNTER) != total)
            fail_msg ("%s: counters and only counters end in _total", row->prometheus);
        bool seconds = strstr (row->prometheus, "_seconds") != NULL;
        if (seconds != (strcmp (row->unit, "seconds") == 0))
            fail_msg ("%s: a time and only a time is in _seconds", row->prometheus);
        bool process = row->scope == FH_SCOPE_PROCESS;
        assert_int_equal (
            strncmp (row->prometheus, process ? "process_" : "fanhub_", process ? 8 : 7), 0);
    }
    s_set_clear (&names);
    s_set_clear (&paths);
}

/* ---- The outputs name exactly the rows ----------------------------------- */

static void
test_prometheus_names_the_rows (void **state)
{
    (void) state;
    fh_metrics_snapshot_t *snapshot = s_full_snapshot ();
    char *text = fh_metrics_prometheus (snapshot);
    assert_non_null (text);
    s_set_t got = {0}, want = {0};
    for (const char *line = text; *line; line = strchr (line, '\n') + 1) {
        char name[128], type[32];
        if (sscanf (line, "# TYPE %127s %31s", name, type) == 2) {
            s_set_add (&got, name);
            for (size_t id = 0; id < FH_METRIC_COUNT; id++)
                if (fh_metrics[id].prometheus && strcmp (fh_metrics[id].prometheus, name) == 0) {
                    const char *types[] = {"counter", "gauge", "histogram", "gauge", "?"};
                    assert_string_equal (type, types[fh_metrics[id].type]);
                }
        }
        else if (line[0] != '#') {
            /* Every sample belongs to a family of the registry. */
            size_t len = strcspn (line, "{ ");
            snprintf (name, sizeof name, "%.*s", (int) len, line);
            const char *suffixes[] = {"_bucket", "_sum", "_count"};
            bool known = false;
            for (size_t id = 0; id < FH_METRIC_COUNT && !known; id++) {
                const char *family = fh_metrics[id].prometheus;
                if (!family || strncmp (name, family, strlen (family)) != 0)
                    continue;
                if (name[strlen (family)] == '\0')
                    known = true;
                for (size_t s = 0; s < 3 && fh_metrics[id].type == FH_METRIC_HISTOGRAM; s++)
                    known = known || strcmp (name + strlen (family), suffixes[s]) == 0;
            }
            if (!known)
                fail_msg ("sample %s of no family of the registry", name);
        }
    }
    for (size_t id = 0; id < FH_METRIC_COUNT; id++)
        if (fh_metrics[id].prometheus)
            s_set_add (&want, fh_metrics[id].prometheus);
    s_set_assert_equal (&got, &want, "Prometheus");
    /* A histogram: the bounds and +Inf, cumulative, then _sum and _count. */
    assert_non_null (strstr (
        text,
        "fanhub_consumer_processing_seconds_bucket{consumer=\"archive\",le=\"6.5536e-05\"} 65\n"
        "fanhub_consumer_processing_seconds_bucket{consumer=\"archive\",le=\"0.000131072\"} "
        "100\n"));
    assert_non_null (strstr (
        text, "fanhub_consumer_processing_seconds_bucket{consumer=\"archive\",le=\"+Inf\"} 100\n"
              "fanhub_consumer_processing_seconds_sum{consumer=\"archive\"} 0.00505\n"
              "fanhub_consumer_processing_seconds_count{consumer=\"archive\"} 100\n"));
    assert_non_null (strstr (text, "\nfanhub_end_to_end_seconds_bucket{le=\"1.024e-06\"} 1\n"));
    free (text);
    s_set_clear (&got);
    s_set_clear (&want);
    fh_metrics_snapshot_destroy (&snapshot);
}

static void
test_collectd_names_the_rows (void **state)
{
    (void) state;
    fh_metrics_snapshot_t *snapshot = s_full_snapshot ();
    char *text = fh_metrics_collectd (snapshot, "h", 10, 0);
    assert_non_null (text);
    s_set_t got = {0}, want = {0};
    for (const char *line = text; *line; line = strchr (line, '\n') + 1) {
        /* PUTVAL "h/fanhub-INSTANCE/TYPE" ...: the TYPE. */
        const char *quote = strchr (line + 8, '"');
        assert_non_null (quote);
        const char *slash = quote;
        while (slash > line && *slash != '/')
            slash--;
        char type[128];
        snprintf (type, sizeof type, "%.*s", (int) (quote - slash - 1), slash + 1);
        s_set_add (&got, type);
    }
    for (size_t id = 0; id < FH_METRIC_COUNT; id++) {
        const fh_metric_t *row = &fh_metrics[id];
        if (!row->collectd)
            continue;
        if (row->type != FH_METRIC_HISTOGRAM) {
            s_set_add (&want, row->collectd);
            continue;
        }
        char type[128];
        snprintf (type, sizeof type, "%s_p99", row->collectd);
        s_set_add (&want, type);
        snprintf (type, sizeof type, "%s_mean", row->collectd);
        s_set_add (&want, type);
    }
    s_set_assert_equal (&got, &want, "collectd");
    assert_non_null (strstr (
        text, "PUTVAL \"h/fanhub-hub1.archive/latency-queue_wait_p99\" interval=10 N:0.0001\n"));
    free (text);
    s_set_clear (&got);
    s_set_clear (&want);
    fh_metrics_snapshot_destroy (&snapshot);
}

/* The keys of a JSON object under prefix, one level. */
static void
s_json_keys (s_set_t *set, const char *prefix, const json_t *object)
{
    assert_true (json_is_object (object));
    const char *key;
    json_t *value;
    json_object_foreach ((json_t *) object, key, value)
    {
        char path[128];
        snprintf (path, sizeof path, "%s%s", prefix, key);
        s_set_add (set, path);
    }
}

static void
test_json_names_the_rows (void **state)
{
    (void) state;
    fh_metrics_snapshot_t *snapshot = s_full_snapshot ();
    json_t *json = fh_metrics_to_json (snapshot);
    assert_non_null (json);
    s_set_t got = {0}, want = {0};
    const json_t *hub = json_object_get (json, "hub");
    s_json_keys (&got, "hub.", hub);
    s_json_keys (&got, "hub.upstream.", json_object_get (hub, "upstream"));
    s_json_keys (&got, "hub.amqp.", json_object_get (hub, "amqp"));
    s_json_keys (&got, "hub.signatures.", json_object_get (hub, "signatures"));
    s_json_keys (&got, "hub.endpoints[].", json_array_get (json_object_get (hub, "endpoints"), 0));
    s_json_keys (&got, "consumers[].", json_array_get (json_object_get (json, "consumers"), 0));
    s_json_keys (&got, "process.", json_object_get (json, "process"));
    /* The containers are structure, not rows. */
    s_set_t containers = {0};
    s_set_add (&containers, "hub.upstream");
    s_set_add (&containers, "hub.amqp");
    s_set_add (&containers, "hub.signatures");
    s_set_add (&containers, "hub.endpoints");
    s_set_t figures = {0};
    for (size_t i = 0; i < got.count; i++)
        if (!s_set_has (&containers, got.items[i]))
            s_set_add (&figures, got.items[i]);
    for (size_t id = 0; id < FH_METRIC_COUNT; id++) {
        const fh_metric_t *row = &fh_metrics[id];
        char path[128];
        snprintf (path, sizeof path, "%s%s", s_scope_prefix (row->scope), row->json);
        if (row->of == row->id) {
            s_set_add (&want, path);
            continue;
        }
        /* A histogram's max is a member of the histogram's object. */
        const json_t *scope = row->scope == FH_SCOPE_HUB
                                  ? hub
                                  : json_array_get (json_object_get (json, "consumers"), 0);
        const char *dot = strchr (row->json, '.');
        assert_non_null (dot);
        char member[64];
        snprintf (member, sizeof member, "%.*s", (int) (dot - row->json), row->json);
        assert_string_equal (member, fh_metrics[row->of].json);
        assert_true (json_is_real (json_object_get (json_object_get (scope, member), dot + 1)));
    }
    s_set_assert_equal (&figures, &want, "JSON");

    /* Read back, the same snapshot: the same texts. */
    fh_metrics_snapshot_t *again = fh_metrics_from_json (json);
    assert_non_null (again);
    char *texts[2][3] = {
        {fh_metrics_prometheus (snapshot), fh_metrics_collectd (snapshot, "h", 10, 0),
         fh_metrics_table (snapshot, 0)},
        {fh_metrics_prometheus (again), fh_metrics_collectd (again, "h", 10, 0),
         fh_metrics_table (again, 0)},
    };
    for (size_t i = 0; i < 3; i++) {
        assert_non_null (texts[0][i]);
        assert_non_null (texts[1][i]);
        assert_string_equal (texts[0][i], texts[1][i]);
        free (texts[0][i]);
        free (texts[1][i]);
    }
    json_t *twice = fh_metrics_to_json (again);
    assert_true (json_equal (json, twice));
    json_decref (twice);
    fh_metrics_snapshot_destroy (&again);
    s_set_clear (&got);
    s_set_clear (&want);
    s_set_clear (&containers);
    s_set_clear (&figures);
    json_decref (json);
    fh_metrics_snapshot_destroy (&snapshot);
}

/* ---- docs/metrics.md ----------------------------------------------------- */

/* The first five cells of a row of the doc's tables, as the registry
   would write them:  | `PATH` | `PROMETHEUS` | `COLLECTD` | TYPE | UNIT |
   with "—" for no name and no unit. */
static void
s_doc_cells (const fh_metric_t *row, char *text, size_t size)
{
    static const char *const types[] = {"counter", "gauge", "histogram", "info", "field"};
    char prometheus[96] = "—", collectd[64] = "—";
    if (row->prometheus)
        snprintf (prometheus, sizeof prometheus, "`%s`", row->prometheus);
    if (row->collectd && row->type == FH_METRIC_HISTOGRAM)
        snprintf (collectd, sizeof collectd, "`%s_p99`, `%s_mean`", row->collectd, row->collectd);
    else if (row->collectd)
        snprintf (collectd, sizeof collectd, "`%s`", row->collectd);
    snprintf (text, size, "| `%s%s` | %s | %s | %s | %s |", s_scope_prefix (row->scope), row->json,
              prometheus, collectd, types[row->type], *row->unit ? row->unit : "—");
}

static void
test_doc_lists_the_rows (void **state)
{
    (void) state;
    char path[1024];
    snprintf (path, sizeof path, "%s/docs/metrics.md", SOURCE_DIR);
    FILE *file = fopen (path, "r");
    if (!file)
        fail_msg ("%s: cannot open", path);
    s_set_t got = {0}, want = {0};
    char line[4096];
    while (fgets (line, sizeof line, file)) {
        /* A row of a metrics table: "| `" then the path; the definition
           (after the fifth cell) is free text. */
        if (strncmp (line, "| `", 3) != 0)
            continue;
        char *cell = line;
        for (int i = 0; i < 5 && cell; i++)
            cell = strchr (cell + 1, '|');
        if (!cell)
            fail_msg ("docs/metrics.md: a row without a definition: %s", line);
        if (strlen (cell + 1) < 4)
            fail_msg ("docs/metrics.md: an empty definition: %s", line);
        cell[1] = '\0';
        s_set_add (&got, line);
    }
    fclose (file);
    for (size_t id = 0; id < FH_METRIC_COUNT; id++) {
        char cells[512];
        s_doc_cells (&fh_metrics[id], cells, sizeof cells);
        s_set_add (&want, cells);
    }
    s_set_assert_equal (&got, &want, "docs/metrics.md");
    s_set_clear (&got);
    s_set_clear (&want);
}

/* ---- Counters as data ---------------------------------------------------- */

/* Every field of fh_consumer_counts_t but `workers` (the busy list's
   length) is read by exactly one row, of the consumer scope. */
static void
test_each_count_has_one_row (void **state)
{
    (void) state;
    bool taken[sizeof (fh_consumer_counts_t) / sizeof (uint64_t)] = {false};
    size_t rows = 0;
    for (size_t id = 0; id < FH_METRIC_COUNT; id++) {
        const fh_metric_t *row = &fh_metrics[id];
        if (row->sum == FH_SUM_NONE)
            continue;
        assert_int_equal (row->scope, FH_SCOPE_CONSUMER);
        assert_int_equal (row->counts_at % sizeof (uint64_t), 0);
        size_t field = row->counts_at / sizeof (uint64_t);
        assert_true (field < sizeof taken / sizeof taken[0]);
        if (taken[field])
            fail_msg ("%s: a field read by two rows", row->json);
        taken[field] = true;
        rows++;
        /* A counter sums as one; a gauge never does. */
        assert_true ((row->type == FH_METRIC_COUNTER) == (row->sum == FH_SUM_TOTAL));
    }
    assert_false (taken[offsetof (fh_consumer_counts_t, workers) / sizeof (uint64_t)]);
    assert_int_equal (rows + 1, sizeof taken / sizeof taken[0]);
}

/* How fh_metrics_counts_add sums: totals and maxima always, what runs
   now only from a live instance. */
static void
test_counts_sum_by_their_rows (void **state)
{
    (void) state;
    fh_consumer_counts_t out = {.enqueued = 5, .backlog_max = 9, .backlog = 2, .capacity = 10};
    fh_consumer_counts_t gone = {.enqueued = 3, .backlog_max = 4, .backlog = 7, .capacity = 99};
    fh_metrics_counts_add (&out, &gone, false);
    assert_int_equal (out.enqueued, 8);
    assert_int_equal (out.backlog_max, 9);
    assert_int_equal (out.backlog, 2);
    assert_int_equal (out.capacity, 10);
    fh_consumer_counts_t live = {.enqueued = 1, .backlog_max = 12, .backlog = 3, .capacity = 20};
    fh_metrics_counts_add (&out, &live, true);
    assert_int_equal (out.enqueued, 9);
    assert_int_equal (out.backlog_max, 12);
    assert_int_equal (out.backlog, 5);
    assert_int_equal (out.capacity, 20);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_rows_are_well_formed),
        cmocka_unit_test (test_prometheus_names_the_rows),
        cmocka_unit_test (test_collectd_names_the_rows),
        cmocka_unit_test (test_json_names_the_rows),
        cmocka_unit_test (test_doc_lists_the_rows),
        cmocka_unit_test (test_each_count_has_one_row),
        cmocka_unit_test (test_counts_sum_by_their_rows),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
