/*  test_stats_table - a STATS snapshot as the table `fanhub stats` prints
    (hub/metrics/stats_table.c): units, widths, the publish line, rates and
    ETA, state and error, and one consumer in full (--consumer).

    The expected text is exact, compared line by line.
*/
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

#include "stats_kit.h"

/* ---- Table --------------------------------------------------------------- */

static void
test_table_units (void **state)
{
    (void) state;
    json_t *stats = s_snapshot (json_string ("buildsys"));
    json_object_set_new (json_object_get (stats, "hub"), "uptime", json_real (83.9));
    static const struct {
        const char *name;
        double wait_p99, proc_p99; /* < 0: no sample in the interval */
        const char *wait, *proc;
    } cases[] = {
        {"us", 0.00085, 0.0123, "850us", "12.3ms"},
        {"s", 1.2, 4.5e-7, "1.20s", "450ns"},
        {"edges", 0.0009996, 0.99996, "1.0ms", "1.00s"},
        {"none", -1, 0.0, "-", "0ns"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        figures_t wait = {cases[i].wait_p99 < 0 ? 0 : 5, 0, 0, 0, 0, cases[i].wait_p99, 0, 0};
        figures_t proc = {cases[i].proc_p99 < 0 ? 0 : 5, 0, 0, 0, 0, cases[i].proc_p99, 0, 0};
        if (wait.count == 0)
            wait.p99 = 0;
        json_array_append_new (
            s_consumers (stats),
            s_consumer (cases[i].name, s_histogram (&s_none, &wait), s_histogram (&s_none, &proc)));
    }
    static const char *const expected[] = {
        "hub buildsys up 1m23s  received 1000  malformed 3  unrouted 5",
        "CONSUMER STATE    BACKLOG     RATE      ETA IN_FLIGHT    ENQUEUED   COMPLETED    FAILED   "
        "DROPPED   SPILLED    DEAD STUCK WAIT_P99 PROC_P99",
        "archive  up             2     10.0       1s         1         992         985         4   "
        "      "
        "0         0       3     0    4.0ms   12.3ms",
        "us       up             2      0.5       4s         1         992         985         4   "
        "      "
        "0         0       3     0    850us   12.3ms",
        "s        up             2      0.5       4s         1         992         985         4   "
        "      "
        "0         0       3     0    1.20s    450ns",
        "edges    up             2      0.5       4s         1         992         985         4   "
        "      "
        "0         0       3     0    1.0ms    1.00s",
        "none     up             2      0.0    never         1         992         985         4   "
        "      "
        "0         0       3     0        -      0ns",
    };
    ASSERT_LINES (fh_stats_format_table (stats), expected);
    json_decref (stats);
}

/* A consumer that publishes (publish:) has a line of its own under its
   row: its endpoints as read back from the JSON, and its two counters. */
static void
test_table_publish_line (void **state)
{
    (void) state;
    json_t *stats = s_snapshot (json_null ());
    json_t *consumer = json_array_get (s_consumers (stats), 0);
    json_object_set_new (consumer, "published", json_integer (12));
    json_object_set_new (consumer, "publish_failed", json_integer (3));
    json_object_set_new (consumer, "publish_endpoints",
                         json_pack ("[s, s]", "tcp://127.0.0.1:41234", "ipc:///run/r.sock"));
    static const char *const expected[] = {
        "hub - up 12s  received 1000  malformed 3  unrouted 5",
        "CONSUMER STATE    BACKLOG     RATE      ETA IN_FLIGHT    ENQUEUED   COMPLETED    FAILED   "
        "DROPPED   SPILLED    DEAD STUCK WAIT_P99 PROC_P99",
        "archive  up             2     10.0       1s         1         992         985         4   "
        "      "
        "0         0       3     0    4.0ms   12.3ms",
        "  publish tcp://127.0.0.1:41234 ipc:///run/r.sock  published 12  failed 3",
    };
    ASSERT_LINES (fh_stats_format_table (stats), expected);
    json_decref (stats);
}

/* The CONSUMER column fits the longest name, up to 32 characters; the
   hub line without a name; uptimes in hours and days. */
static void
test_table_widths (void **state)
{
    (void) state;
    json_t *stats = s_snapshot (json_null ());
    json_object_set_new (json_object_get (stats, "hub"), "uptime", json_real (90061.0));
    json_object_set_new (json_array_get (s_consumers (stats), 0), "name",
                         json_string ("a-very-long-consumer-name-that-goes-on"));
    json_array_append_new (
        s_consumers (stats),
        s_consumer ("esc\x1b[2J", s_histogram (&s_none, &s_none), s_histogram (&s_none, &s_none)));
    static const char *const expected[] = {
        "hub - up 1d01h01m  received 1000  malformed 3  unrouted 5",
        "CONSUMER                         STATE    BACKLOG     RATE      ETA IN_FLIGHT    ENQUEUED "
        "  "
        "COMPLETED    FAILED   DROPPED   SPILLED    DEAD STUCK WAIT_P99 PROC_P99",
        "a-very-long-consumer-name-that-~ up             2     10.0       1s         1         992 "
        "       "
        " 985         4         0         0       3     0    4.0ms   12.3ms",
        "esc?[2J                          up             2      0.0    never         1         992 "
        "       "
        " 985         4         0         0       3     0        -        -",
    };
    ASSERT_LINES (fh_stats_format_table (stats), expected);

    static const struct {
        double uptime;
        const char *line;
    } uptimes[] = {
        {0, "hub - up 0s  "},          {59.99, "hub - up 59s  "}, {3600, "hub - up 1h00m00s  "},
        {7325, "hub - up 2h02m05s  "}, {-5, "hub - up 0s  "},
    };
    for (size_t i = 0; i < sizeof uptimes / sizeof uptimes[0]; i++) {
        json_object_set_new (json_object_get (stats, "hub"), "uptime",
                             json_real (uptimes[i].uptime));
        char *text = fh_stats_format_table (stats);
        assert_non_null (text);
        if (strncmp (text, uptimes[i].line, strlen (uptimes[i].line)) != 0)
            fail_msg ("uptime %g: %s", uptimes[i].uptime, text);
        free (text);
    }
    json_decref (stats);
}

/* The columns of one consumer's line after the name: BACKLOG RATE ETA. */
static void
s_assert_rate (char *text, const char *name, const char *columns)
{
    assert_non_null (text);
    const char *line = strstr (text, name);
    assert_non_null (line);
    char want[128];
    /* The STATE column between the name (and its padding) and these. */
    snprintf (want, sizeof want, "%s  up    %s ", name, columns + 1);
    if (strncmp (line, want, strlen (want)) != 0)
        fail_msg ("want \"%s\" in:\n%s", want, text);
    free (text);
}

/* RATE between two snapshots (dequeued over uptime), else over the
   interval; ETA = backlog / RATE in human units; the columns that are
   new beside the old ones. */
static void
test_table_rate_and_eta (void **state)
{
    (void) state;
    json_t *before = s_snapshot (json_null ());
    json_t *after = s_snapshot (json_null ());
    json_t *b = json_array_get (s_consumers (before), 0);
    json_t *a = json_array_get (s_consumers (after), 0);
    json_object_set_new (json_object_get (after, "hub"), "uptime", json_real (22.5));
    /* 10 s later, 250 more taken off the queue: 25.0/s, 5000 left: 200 s. */
    json_object_set_new (a, "dequeued", json_integer (990 + 250));
    json_object_set_new (a, "backlog", json_integer (5000));
    s_assert_rate (fh_stats_format_table_since (after, before, 0), "archive",
                   "       5000     25.0    3m20s");
    /* Without the earlier snapshot: the interval's 100 samples over 10 s. */
    s_assert_rate (fh_stats_format_table (after), "archive", "       5000     10.0    8m20s");
    /* A counter that went back (a restart) or no earlier uptime: interval. */
    json_object_set_new (b, "dequeued", json_integer (5000));
    s_assert_rate (fh_stats_format_table_since (after, before, 0), "archive",
                   "       5000     10.0    8m20s");
    json_object_set_new (b, "dequeued", json_integer (990));
    json_object_set_new (json_object_get (before, "hub"), "uptime", json_real (30.0));
    s_assert_rate (fh_stats_format_table_since (after, before, 0), "archive",
                   "       5000     10.0    8m20s");
    json_object_set_new (json_object_get (before, "hub"), "uptime", json_real (12.5));
    /* Hours and days; nothing to drain; a stopped consumer. */
    static const struct {
        int backlog;
        const char *columns;
    } etas[] = {
        {90000000, "   90000000     25.0   41d16h"},
        {250000, "     250000     25.0    2h46m"},
        {0, "          0     25.0        -"},
    };
    for (size_t i = 0; i < sizeof etas / sizeof etas[0]; i++) {
        json_object_set_new (a, "backlog", json_integer (etas[i].backlog));
        s_assert_rate (fh_stats_format_table_since (after, before, 0), "archive", etas[i].columns);
    }
    json_object_set_new (a, "dequeued", json_integer (990));
    json_object_set_new (a, "backlog", json_integer (7));
    s_assert_rate (fh_stats_format_table_since (after, before, 0), "archive",
                   "          7      0.0    never");
    /* The first interval has not ended: the 990 started since start, over
       4.5 s of uptime. */
    json_object_set_new (json_object_get (after, "hub"), "uptime", json_real (4.5));
    json_object_set_new (a, "backlog", json_integer (440));
    s_assert_rate (fh_stats_format_table (after), "archive", "        440    220.0       2s");
    /* SPILLED, DEAD and STUCK are the snapshot's. */
    json_object_set_new (a, "spilled", json_integer (378));
    json_object_set_new (a, "dead_lettered", json_integer (12));
    json_object_set_new (a, "stuck", json_integer (2));
    char *text = fh_stats_format_table (after);
    assert_non_null (strstr (text, "       378      12     2 "));
    free (text);
    json_decref (before);
    json_decref (after);
}

/* STATE from the plugin's state and stuck; the last error on a line of
   its own under its consumer's, cut to the width given at a UTF-8
   character, its control characters (C1 too) shown as '?' (a JSON string
   is valid UTF-8: jansson checks it). */
static void
test_table_state_and_error (void **state)
{
    (void) state;
    json_t *stats = s_snapshot (json_string ("buildsys"));
    json_t *consumers = s_consumers (stats);
    static const struct {
        const char *name;
        int state, stuck;
        const char *error;
    } cases[] = {
        {"py", 1, 0, "worker 0: refused to start: ConnectionRefusedError: [Errno 111]"},
        {"fm", 2, 0, "halted: HaltConsumer: bad credentials \xc3\xa9t\xc3\xa9 \x1b[2J"},
        {"slow", 0, 2, ""},
        {"odd", 7, 0,
         "\xc2\x9b"
         "1m C1 CSI"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *c = s_consumer (cases[i].name, s_histogram (&s_none, &s_none),
                                s_histogram (&s_none, &s_none));
        json_object_set_new (c, "state", json_integer (cases[i].state));
        json_object_set_new (c, "stuck", json_integer (cases[i].stuck));
        json_object_set_new (c, "last_error", json_string (cases[i].error));
        json_array_append_new (consumers, c);
    }
    char *text = fh_stats_format_table_since (stats, NULL, 0);
    assert_non_null (text);
    static const char *const wanted[] = {
        "\narchive  up    ",
        "\npy       down  ",
        "\n  last error: worker 0: refused to start: ConnectionRefusedError: [Errno 111]\n",
        "\nfm       halted",
        "\n  last error: halted: HaltConsumer: bad credentials \xc3\xa9t\xc3\xa9 ?[2J\n",
        "\nslow     stuck ",
        "\nodd      ?     ",
        "\n  last error: ?1m C1 CSI\n",
    };
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++)
        if (!strstr (text, wanted[i]))
            fail_msg ("no \"%s\" in:\n%s", wanted[i], text);
    assert_null (strstr (text, "\nslow     stuck  \n  last error"));
    free (text);

    /* Cut to 58 columns: "  last error: " and 44 characters, the last
       '~'; to 54, the cut falls after the two-byte e-acute, never inside. */
    text = fh_stats_format_table_since (stats, NULL, 58);
    assert_non_null (
        strstr (text, "\n  last error: worker 0: refused to start: ConnectionRefus~\n"));
    free (text);
    text = fh_stats_format_table_since (stats, NULL, 54);
    assert_non_null (
        strstr (text, "\n  last error: halted: HaltConsumer: bad credentials \xc3\xa9~\n"));
    free (text);
    text = fh_stats_format_table_since (stats, NULL, 14 + 53);
    assert_non_null (strstr (
        text, "\n  last error: halted: HaltConsumer: bad credentials \xc3\xa9t\xc3\xa9 ?[2J\n"));
    free (text);
    json_decref (stats);
}

/* --consumer NAME: one consumer in full; an unknown name is not found. */
static void
test_consumer_view (void **state)
{
    (void) state;
    json_t *stats = s_snapshot (json_string ("buildsys"));
    json_t *c = json_array_get (s_consumers (stats), 0);
    json_object_set_new (c, "state", json_integer (1));
    json_object_set_new (c, "restarts", json_integer (4));
    json_object_set_new (c, "last_error", json_string ("worker 1: exited with status 3"));
    json_object_set_new (c, "workers", json_pack ("[{s:f}, {s:f}]", "busy", 0.125, "busy", 0.5));
    bool found = false;
    char *text = fh_stats_format_consumer (stats, "archive", &found);
    assert_non_null (text);
    assert_true (found);
    static const char *const wanted[] = {
        "consumer             archive\n",
        "\nplugin               log 1.0\n",
        "\nstate                down\n",
        "\nlast error           worker 1: exited with status 3\n",
        "\nenqueued             992\n",
        "\ndead_lettered        3\n",
        "\nrestarts             4\n",
        "\nspool_lost           10\n",
        "\nqueue_wait           last interval  count 100  p50 900us  p90 2.0ms  p99 4.0ms",
        "\n                     since start    count 990  p50 900us",
        "\nprocessing           last interval  count 0\n",
        ("\nworkers              2\n  worker 0           busy 12.5%\n  worker 1           busy "
         "50.0%\n"),
    };
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++)
        if (!strstr (text, wanted[i]))
            fail_msg ("no \"%s\" in:\n%s", wanted[i], text);
    free (text);
    text = fh_stats_format_consumer (stats, "nobody", &found);
    assert_non_null (text);
    assert_false (found);
    assert_string_equal (text, "");
    free (text);
    json_decref (stats);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_table_units),           cmocka_unit_test (test_table_widths),
        cmocka_unit_test (test_table_publish_line),    cmocka_unit_test (test_table_rate_and_eta),
        cmocka_unit_test (test_table_state_and_error), cmocka_unit_test (test_consumer_view),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
