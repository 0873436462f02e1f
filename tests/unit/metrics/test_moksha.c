/*  test_moksha - moksha.hub-shaped monitoring messages (hub/metrics/moksha.c).

    The "times" list is made from histogram buckets, so its cases pin that
    expansion: exact values below 16 ns, bucket midpoints in bucket order
    above, the cap, and only the samples of the interval. The live case
    runs a real hub on inproc sockets (a publisher in the test, the hub's
    SUB, moksha's PUB and a SUB here), drives fh_moksha_tick with a made-up
    clock and checks every field of the messages: the deltas of an
    interval, then an interval with nothing in it. Waits are for
    conditions, with a deadline that only turns a hang into a failure.
*/
#include "moksha.h"

#include "clock.h"

#include <czmq.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_dir.h"

#define DEADLINE_NS (INT64_C (60) * 1000000000)
#define NS_PER_S 1000000000.0

static fh_histogram_snapshot_t *
s_snapshot_of (const int64_t *values, size_t count)
{
    fh_histogram_t *histogram = malloc (sizeof *histogram);
    fh_histogram_snapshot_t *snapshot = malloc (sizeof *snapshot);
    assert_non_null (histogram);
    assert_non_null (snapshot);
    fh_histogram_init (histogram);
    for (size_t i = 0; i < count; i++)
        fh_histogram_record (histogram, values[i]);
    fh_histogram_read (histogram, snapshot);
    free (histogram);
    return snapshot;
}

/* ---- times from buckets ---------------------------------------------------- */

static void
test_times_empty (void **state)
{
    (void) state;
    fh_histogram_snapshot_t *empty = s_snapshot_of (NULL, 0);
    double out[4] = {-1, -1, -1, -1};
    assert_int_equal (fh_moksha_times (empty, out, 4), 0);
    assert_true (out[0] == -1); /* nothing written */
    free (empty);
}

static void
test_times_exact_below_16ns (void **state)
{
    (void) state;
    int64_t values[] = {7, 3, 0, 3, 15, -5 /* counts as 0 */};
    fh_histogram_snapshot_t *snap = s_snapshot_of (values, 6);
    double out[8];
    assert_int_equal (fh_moksha_times (snap, out, 8), 6);
    double want[] = {0, 0, 3e-9, 3e-9, 7e-9, 15e-9};
    for (size_t i = 0; i < 6; i++)
        assert_true (out[i] == want[i]);
    free (snap);
}

static void
test_times_midpoints_in_bucket_order (void **state)
{
    (void) state;
    /* 1 s, 250 us, 2 ms, 250 us, 17 ns, 40 ms: out of order on purpose. */
    int64_t values[] = {1000000000, 250000, 2000000, 250000, 17, 40000000};
    fh_histogram_snapshot_t *snap = s_snapshot_of (values, 6);
    double out[6];
    assert_int_equal (fh_moksha_times (snap, out, 6), 6);
    int64_t sorted[] = {17, 250000, 250000, 2000000, 40000000, 1000000000};
    for (size_t i = 0; i < 6; i++) {
        unsigned bucket = fh_histogram_bucket ((uint64_t) sorted[i]);
        double low = (double) fh_histogram_bucket_low (bucket) / NS_PER_S;
        double high = (double) fh_histogram_bucket_high (bucket) / NS_PER_S;
        /* The middle of the bucket, within 3.2% of the value recorded. */
        assert_true (out[i] >= low && out[i] < high);
        assert_true (out[i] == (low + high - 1 / NS_PER_S) / 2
                     || out[i] - (low + high - 1 / NS_PER_S) / 2 < 1e-15);
        double error = (out[i] - (double) sorted[i] / NS_PER_S) / ((double) sorted[i] / NS_PER_S);
        assert_true (error < 0.032 && error > -0.032);
        if (i > 0)
            assert_true (out[i] >= out[i - 1]);
    }
    free (snap);
}

static void
test_times_cap (void **state)
{
    (void) state;
    /* 500 slow ones recorded first, then 1500 fast ones: the list keeps
       bucket order, so the cap takes the fast ones. */
    int64_t *values = malloc (2000 * sizeof *values);
    assert_non_null (values);
    for (size_t i = 0; i < 2000; i++)
        values[i] = i < 500 ? 1000000000 : 1000;
    fh_histogram_snapshot_t *snap = s_snapshot_of (values, 2000);
    double *out = malloc (FH_MOKSHA_MAX_TIMES * sizeof *out);
    assert_non_null (out);
    assert_int_equal (fh_moksha_times (snap, out, FH_MOKSHA_MAX_TIMES), FH_MOKSHA_MAX_TIMES);
    for (size_t i = 0; i < FH_MOKSHA_MAX_TIMES; i++)
        assert_true (out[i] > 0.9e-6 && out[i] < 1.1e-6);
    /* A smaller room, and none. */
    assert_int_equal (fh_moksha_times (snap, out, 3), 3);
    assert_int_equal (fh_moksha_times (snap, out, 0), 0);
    /* Exactly full: every value, the slow ones last. */
    int64_t some[] = {1000, 1000000000, 1000};
    fh_histogram_snapshot_t *three = s_snapshot_of (some, 3);
    assert_int_equal (fh_moksha_times (three, out, 3), 3);
    assert_true (out[0] == out[1] && out[2] > 0.9 && out[2] < 1.1);
    free (three);
    free (out);
    free (snap);
    free (values);
}

static void
test_times_of_an_interval (void **state)
{
    (void) state;
    fh_histogram_t *histogram = malloc (sizeof *histogram);
    fh_histogram_snapshot_t *before = malloc (sizeof *before);
    fh_histogram_snapshot_t *after = malloc (sizeof *after);
    assert_true (histogram && before && after);
    fh_histogram_init (histogram);
    for (int i = 0; i < 100; i++)
        fh_histogram_record (histogram, 5000000); /* before the boundary */
    fh_histogram_read (histogram, before);
    fh_histogram_record (histogram, 8);
    fh_histogram_record (histogram, 5000000);
    fh_histogram_read (histogram, after);
    fh_histogram_diff (after, before, after);
    double out[8];
    assert_int_equal (fh_moksha_times (after, out, 8), 2);
    assert_true (out[0] == 8e-9);
    assert_true (out[1] > 5e-3 * 0.968 && out[1] < 5e-3 * 1.032); /* its bucket's middle */
    free (after);
    free (before);
    free (histogram);
}

/* ---- fh_moksha_new ------------------------------------------------------------ */

static fh_config_t *
s_config (const char *text)
{
    char err[512];
    fh_config_t *config = fh_config_load_string (text, strlen (text), "t.yaml", err, sizeof err);
    if (!config)
        fail_msg ("config: %s", err);
    return config;
}

static fh_hub_t *
s_hub (fh_config_t *config)
{
    char err[512];
    fh_hub_t *hub = fh_hub_new (config, SHIPPED_PLUGIN_DIR, err, sizeof err);
    if (!hub)
        fail_msg ("hub: %s", err);
    return hub;
}

static void
test_not_configured (void **state)
{
    (void) state;
    fh_config_t *config = s_config ("bus: {connect: [tcp://127.0.0.1:9]}\n"
                                    "consumers: [{name: a, plugin: \"null\"}]\n");
    fh_hub_t *hub = s_hub (config);
    char err[256] = "untouched";
    assert_null (fh_moksha_new (hub, err, sizeof err));
    assert_string_equal (err, "");
    fh_moksha_tick (NULL, 0); /* harmless */
    fh_moksha_t *none = NULL;
    fh_moksha_destroy (&none);
    fh_hub_destroy (&hub);
    fh_config_destroy (&config);
}

static void
test_bind_failure_names_the_endpoint (void **state)
{
    (void) state;
    /* Hold a port, then ask moksha to bind it. */
    zsock_t *holder = zsock_new (ZMQ_PUB);
    assert_non_null (holder);
    zsock_set_linger (holder, 0);
    int port = zsock_bind (holder, "tcp://127.0.0.1:*");
    assert_true (port > 0);
    char text[512];
    snprintf (text, sizeof text,
              "bus: {connect: [tcp://127.0.0.1:9]}\n"
              "metrics: {moksha_socket: \"tcp://127.0.0.1:%d\"}\n"
              "consumers: [{name: a, plugin: \"null\"}]\n",
              port);
    fh_config_t *config = s_config (text);
    fh_hub_t *hub = s_hub (config);
    char err[256] = "";
    assert_null (fh_moksha_new (hub, err, sizeof err));
    char want[128];
    snprintf (want, sizeof want, "moksha: cannot bind tcp://127.0.0.1:%d: ", port);
    if (strncmp (err, want, strlen (want)) != 0 || !strstr (err, "in use"))
        fail_msg ("err: %s", err);
    assert_null (strchr (err, '\n'));
    fh_hub_destroy (&hub);
    fh_config_destroy (&config);
    zsock_destroy (&holder);
}

static void
test_ipc_socket_mode (void **state)
{
    (void) state;
    char dir[96];
    assert_non_null (mkdtemp (test_tmp_template (dir, sizeof dir, "fanhub-moksha")));
    char text[512], path[128];
    snprintf (path, sizeof path, "%s/sub/moksha.sock", dir); /* sub/ is made */
    snprintf (text, sizeof text,
              "bus: {connect: [tcp://127.0.0.1:9]}\n"
              "metrics: {moksha_socket: \"ipc://%s\"}\n"
              "consumers: [{name: a, plugin: \"null\"}]\n",
              path);
    fh_config_t *config = s_config (text);
    fh_hub_t *hub = s_hub (config);
    mode_t old = umask (0);
    char err[256] = "";
    fh_moksha_t *moksha = fh_moksha_new (hub, err, sizeof err);
    umask (old);
    if (!moksha)
        fail_msg ("moksha: %s", err);
    struct stat st;
    assert_int_equal (stat (path, &st), 0);
    assert_int_equal (st.st_mode & 0777, 0660);
    fh_moksha_destroy (&moksha);
    assert_null (moksha);
    assert_int_not_equal (access (path, F_OK), 0); /* removed */
    fh_hub_destroy (&hub);
    fh_config_destroy (&config);
    char sub[128];
    snprintf (sub, sizeof sub, "%s/sub", dir);
    rmdir (sub);
    rmdir (dir);
}

/* ---- a live hub ------------------------------------------------------------------ */

typedef struct {
    fh_config_t *config;
    fh_hub_t *hub;
    fh_moksha_t *moksha;
    zsock_t *publisher; /* XPUB: says when the hub has subscribed */
    zsock_t *monitor;   /* SUB on the moksha socket */
    int64_t now;        /* the made-up clock given to fh_moksha_tick */
    int64_t interval;
    char count_path[512];
} live_t;

/* Receives one monitoring message within the deadline, parsed. */
static json_t *
s_receive (live_t *live, bool wait)
{
    zmq_pollitem_t item = {zsock_resolve (live->monitor), 0, ZMQ_POLLIN, 0};
    if (zmq_poll (&item, 1, wait ? (long) (DEADLINE_NS / 1000000) : 0) <= 0)
        return NULL;
    zmsg_t *msg = zmsg_recv (live->monitor);
    assert_non_null (msg);
    assert_int_equal (zmsg_size (msg), 1); /* one frame, as moksha sends */
    char *text = zmsg_popstr (msg);
    zmsg_destroy (&msg);
    json_error_t jerr;
    json_t *json = json_loads (text, 0, &jerr);
    if (!json)
        fail_msg ("not JSON (%s): %s", jerr.text, text);
    free (text);
    return json;
}

static void
s_live_start (live_t *live)
{
    memset (live, 0, sizeof *live);
    const char *tmp = getenv ("TMPDIR");
    snprintf (live->count_path, sizeof live->count_path, "%s/fanhub-moksha-count-%d",
              tmp && *tmp ? tmp : "/tmp", (int) getpid ());
    char text[1024];
    snprintf (text, sizeof text,
              "bus: {bind: [\"inproc://test-moksha-bus\"]}\n"
              "metrics: {moksha_socket: \"inproc://test-moksha\", moksha_interval: 1}\n"
              "consumers:\n"
              "  - {name: every, plugin: %s/count.so,\n"
              "     options: {path: %s, fail_every: 2}}\n"
              "  - {name: one, plugin: \"null\", topics: [org.]}\n"
              "  - {name: two, plugin: \"null\", topics: [org., \"*.x\"]}\n",
              TEST_PLUGIN_DIR, live->count_path);
    live->config = s_config (text);
    live->hub = s_hub (live->config);
    char err[512];
    if (fh_hub_start (live->hub, err, sizeof err) != 0)
        fail_msg ("start: %s", err);
    live->moksha = fh_moksha_new (live->hub, err, sizeof err);
    if (!live->moksha)
        fail_msg ("moksha: %s", err);
    live->interval = INT64_C (1000000000);
    live->now = fh_clock_mono_ns ();

    live->monitor = zsock_new_sub ("inproc://test-moksha", "");
    assert_non_null (live->monitor);
    /* The SUB's subscription reaches the PUB some time after connect:
       publish until a message comes through. */
    int64_t end = fh_clock_mono_ns () + DEADLINE_NS;
    json_t *first = NULL;
    while (!first) {
        assert_true (fh_clock_mono_ns () < end);
        live->now += live->interval;
        fh_moksha_tick (live->moksha, live->now);
        zmq_pollitem_t item = {zsock_resolve (live->monitor), 0, ZMQ_POLLIN, 0};
        if (zmq_poll (&item, 1, 20) > 0)
            first = s_receive (live, false);
    }
    json_decref (first);

    live->publisher = zsock_new (ZMQ_XPUB);
    assert_non_null (live->publisher);
    zsock_set_sndhwm (live->publisher, 0);
    assert_int_equal (zsock_connect (live->publisher, "inproc://test-moksha-bus"), 0);
    zmq_pollitem_t item = {zsock_resolve (live->publisher), 0, ZMQ_POLLIN, 0};
    assert_true (zmq_poll (&item, 1, (long) (DEADLINE_NS / 1000000)) > 0);
    zframe_t *subscription = zframe_recv (live->publisher);
    zframe_destroy (&subscription);
}

static void
s_live_stop (live_t *live)
{
    fh_moksha_destroy (&live->moksha);
    zsock_destroy (&live->monitor);
    zsock_destroy (&live->publisher);
    fh_hub_stop_receiving (live->hub);
    int64_t end = fh_clock_mono_ns () + DEADLINE_NS;
    while (!fh_hub_drained (live->hub)) {
        assert_true (fh_clock_mono_ns () < end);
        nanosleep (&(struct timespec){0, 1000000}, NULL);
    }
    fh_hub_destroy (&live->hub);
    fh_config_destroy (&live->config);
    unlink (live->count_path);
}

static json_t *
s_entry (json_t *message, const char *name)
{
    json_t *consumers = json_object_get (message, "consumers");
    assert_true (json_is_array (consumers));
    size_t i;
    json_t *entry;
    json_array_foreach (
        consumers, i,
        entry) if (json_is_string (json_object_get (entry, "name"))
                   && strcmp (json_string_value (json_object_get (entry, "name")), name)
                          == 0) return entry;
    fail_msg ("no consumer %s", name);
    return NULL;
}

static json_int_t
s_int (json_t *entry, const char *key)
{
    json_t *value = json_object_get (entry, key);
    if (!json_is_integer (value))
        fail_msg ("%s is not an integer", key);
    return json_integer_value (value);
}

/* The fields every entry has, in moksha's order, with their types. */
static void
s_check_shape (json_t *message)
{
    assert_true (json_is_object (message));
    assert_int_equal (json_object_size (message), 2);
    json_t *producers = json_object_get (message, "producers");
    assert_true (json_is_array (producers));
    assert_int_equal (json_array_size (producers), 0);
    json_t *consumers = json_object_get (message, "consumers");
    assert_int_equal (json_array_size (consumers), 3);
    static const char *keys[] = {"name",         "module",  "topic",   "initialized",
                                 "exceptions",   "jsonify", "backlog", "headcount_out",
                                 "headcount_in", "times"};
    size_t i;
    json_t *entry;
    json_array_foreach (consumers, i, entry)
    {
        assert_int_equal (json_object_size (entry), 10);
        size_t k = 0;
        const char *key;
        json_t *value;
        json_object_foreach (entry, key, value) assert_string_equal (key, keys[k++]);
        assert_true (json_is_true (json_object_get (entry, "initialized")));
        assert_true (json_is_true (json_object_get (entry, "jsonify")));
        assert_true (json_is_array (json_object_get (entry, "times")));
    }
    const char *want_names[] = {"every", "one", "two"};
    const char *want_modules[] = {"/count.so", "/null.so", "/null.so"};
    json_array_foreach (consumers, i, entry)
    {
        assert_string_equal (json_string_value (json_object_get (entry, "name")), want_names[i]);
        const char *module = json_string_value (json_object_get (entry, "module"));
        assert_non_null (module);
        assert_true (strlen (module) > strlen (want_modules[i]));
        assert_string_equal (module + strlen (module) - strlen (want_modules[i]), want_modules[i]);
    }
    /* topic: "*" for every message, a string for one pattern, else a list. */
    assert_string_equal (json_string_value (json_object_get (s_entry (message, "every"), "topic")),
                         "*");
    assert_string_equal (json_string_value (json_object_get (s_entry (message, "one"), "topic")),
                         "org.");
    json_t *two = json_object_get (s_entry (message, "two"), "topic");
    assert_true (json_is_array (two));
    assert_int_equal (json_array_size (two), 2);
    assert_string_equal (json_string_value (json_array_get (two, 0)), "org.");
    assert_string_equal (json_string_value (json_array_get (two, 1)), "*.x");
}

static void
test_live_intervals (void **state)
{
    (void) state;
    live_t live;
    s_live_start (&live);
    enum { N = 10 };
    for (int i = 0; i < N; i++) {
        zstr_sendm (live.publisher, "org.example.x");
        zstr_sendf (live.publisher, "{\"i\": %d}", i);
    }
    /* Every consumer done with every message. */
    int64_t end = fh_clock_mono_ns () + DEADLINE_NS;
    for (size_t c = 0; c < 3; c++) {
        fh_consumer_counts_t counts;
        while (fh_consumer_counts (fh_hub_consumer (live.hub, c), &counts),
               counts.completed + counts.failed < N) {
            assert_true (fh_clock_mono_ns () < end);
            nanosleep (&(struct timespec){0, 1000000}, NULL);
        }
    }

    /* Not yet time: nothing. Then one interval later: one message. */
    fh_moksha_tick (live.moksha, live.now);
    fh_moksha_tick (live.moksha, live.now + live.interval);
    json_t *message = s_receive (&live, true);
    assert_non_null (message);
    assert_null (s_receive (&live, false));
    s_check_shape (message);
    const char *names[] = {"every", "one", "two"};
    for (size_t c = 0; c < 3; c++) {
        json_t *entry = s_entry (message, names[c]);
        assert_int_equal (s_int (entry, "headcount_in"), N);
        assert_int_equal (s_int (entry, "headcount_out"), N);
        assert_int_equal (s_int (entry, "backlog"), 0);
        /* count.so fails every second call. */
        assert_int_equal (s_int (entry, "exceptions"), c == 0 ? N / 2 : 0);
        json_t *times = json_object_get (entry, "times");
        assert_int_equal (json_array_size (times), N);
        size_t i;
        json_t *t;
        json_array_foreach (times, i, t)
        {
            assert_true (json_is_real (t));
            assert_true (json_real_value (t) >= 0);
            if (i > 0)
                assert_true (json_real_value (t)
                             >= json_real_value (json_array_get (times, i - 1)));
        }
    }
    json_decref (message);

    /* An interval with nothing in it: zeros and no times. */
    fh_moksha_tick (live.moksha, live.now + 2 * live.interval);
    message = s_receive (&live, true);
    assert_non_null (message);
    s_check_shape (message);
    for (size_t c = 0; c < 3; c++) {
        json_t *entry = s_entry (message, names[c]);
        assert_int_equal (s_int (entry, "headcount_in"), 0);
        assert_int_equal (s_int (entry, "headcount_out"), 0);
        assert_int_equal (s_int (entry, "exceptions"), 0);
        assert_int_equal (json_array_size (json_object_get (entry, "times")), 0);
    }
    json_decref (message);

    /* Boundaries that were missed are skipped: one message, not three. */
    fh_moksha_tick (live.moksha, live.now + 5 * live.interval + 1);
    fh_moksha_tick (live.moksha, live.now + 5 * live.interval + 2);
    message = s_receive (&live, true);
    assert_non_null (message);
    json_decref (message);
    assert_null (s_receive (&live, false));
    s_live_stop (&live);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_times_empty),
        cmocka_unit_test (test_times_exact_below_16ns),
        cmocka_unit_test (test_times_midpoints_in_bucket_order),
        cmocka_unit_test (test_times_cap),
        cmocka_unit_test (test_times_of_an_interval),
        cmocka_unit_test (test_not_configured),
        cmocka_unit_test (test_bind_failure_names_the_endpoint),
        cmocka_unit_test (test_ipc_socket_mode),
        cmocka_unit_test (test_live_intervals),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
