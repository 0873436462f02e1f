/*  test_collectd_notify - PUTNOTIF lines from a series of snapshots
    (hub/metrics/collectd_notify.c): each condition warns once when it
    starts and says okay once when it ends; the exact line collectd
    parses; a lost batch is said again. Times are made up: nothing waits.
*/
#include "collectd_notify.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define WHEN 1764300000.0

/* A hub named hub1 with one consumer "archive" and one endpoint. */
static fh_metrics_snapshot_t *
s_snapshot (int64_t backlog, int64_t warn_at, int64_t stuck, const char *kind, bool connected)
{
    fh_metrics_snapshot_t *self = fh_metrics_snapshot_new ();
    assert_non_null (self);
    assert_int_equal (fh_metrics_set_text (&self->hub.name, "hub1"), 0);
    fh_metrics_item_t *consumer = fh_metrics_add_consumers (self, 1);
    assert_non_null (consumer);
    assert_int_equal (fh_metrics_set_text (&consumer->name, "archive"), 0);
    fh_metrics_set_int (consumer, FH_M_BACKLOG, backlog);
    fh_metrics_set_int (consumer, FH_M_WARN_AT, warn_at);
    fh_metrics_set_int (consumer, FH_M_STUCK, stuck);
    fh_metrics_item_t *endpoint = fh_metrics_add_endpoints (self, 1);
    assert_non_null (endpoint);
    assert_int_equal (fh_metrics_set_text (&endpoint->name, "tcp://bus1:9940"), 0);
    assert_int_equal (fh_metrics_set_text (&endpoint->text, kind), 0);
    fh_metrics_set_int (endpoint, FH_M_ENDPOINT_CONNECTED, connected);
    return self;
}

/* The fixture of every case: a notifier whose endpoints warn after 10 s. */
static int
s_setup (void **state)
{
    *state = fh_collectd_notify_new (10);
    return *state ? 0 : -1;
}

static int
s_teardown (void **state)
{
    fh_collectd_notify_t *notify = *state;
    fh_collectd_notify_destroy (&notify);
    fh_collectd_notify_destroy (&notify); /* twice: the second is a no-op */
    return 0;
}

/* One call; the text it gave (the caller frees it). */
static char *
s_call (fh_collectd_notify_t *notify, fh_metrics_snapshot_t *snapshot, double now_s)
{
    char *text = fh_collectd_notify (notify, snapshot, "web1", now_s, WHEN);
    assert_non_null (text);
    fh_metrics_snapshot_destroy (&snapshot);
    return text;
}

/* Checks that text is exactly expected (NULL: nothing), then frees it. */
static void
s_expect (char *text, const char *expected, const char *step)
{
    if (strcmp (text, expected ? expected : "") != 0)
        fail_msg ("%s:\n  got      \"%s\"\n  expected \"%s\"", step, text,
                  expected ? expected : "");
    free (text);
}

/* The line of a notification about hub1's consumer "archive" or its
   endpoint, from host web1: which is the plugin instance and type. */
#define NOTIF(severity, which, message)                                                            \
    "PUTNOTIF severity=" severity " time=1764300000 host=web1 plugin=fanhub "                      \
    "plugin_instance=hub1." which " message=\"" message "\"\n"
#define ARCHIVE "archive type=queue_length"
#define STUCK "archive type=count type_instance=stuck"
#define ENDPOINT "endpoint_tcp_bus1_9940 type=bool type_instance=connected"
#define STATE "archive type=gauge type_instance=state"

#define BACKLOG_WARNING                                                                            \
    NOTIF ("warning", ARCHIVE, "consumer 'archive': backlog 10 reached queue.warn_at 10")

static void
test_backlog_warns_once_and_rearms_at_half (void **state)
{
    fh_collectd_notify_t *notify = *state;
    s_expect (s_call (notify, s_snapshot (5, 10, 0, "connect", true), 0), NULL, "below");
    s_expect (s_call (notify, s_snapshot (10, 10, 0, "connect", true), 1), BACKLOG_WARNING,
              "reached");
    s_expect (s_call (notify, s_snapshot (12, 10, 0, "connect", true), 2), NULL, "above");
    s_expect (s_call (notify, s_snapshot (5, 10, 0, "connect", true), 3), NULL, "at half");
    s_expect (s_call (notify, s_snapshot (4, 10, 0, "connect", true), 4),
              NOTIF ("okay", ARCHIVE,
                     "consumer 'archive': backlog 4 is below half of queue.warn_at 10 again"),
              "below half");
    s_expect (s_call (notify, s_snapshot (10, 10, 0, "connect", true), 5), BACKLOG_WARNING,
              "again");
    /* A reload that sets warn_at to 0 ends the warning; 0 never warns. */
    char *text = s_call (notify, s_snapshot (500, 0, 0, "connect", true), 6);
    assert_non_null (strstr (text, "severity=okay"));
    free (text);
    s_expect (s_call (notify, s_snapshot (900, 0, 0, "connect", true), 7), NULL, "no warn_at");
}

static void
test_stuck_warns_then_okay (void **state)
{
    fh_collectd_notify_t *notify = *state;
    s_expect (s_call (notify, s_snapshot (0, 0, 2, "connect", true), 0),
              NOTIF ("warning", STUCK,
                     "consumer 'archive': 2 worker(s) stuck in consume past consume_timeout"),
              "stuck");
    s_expect (s_call (notify, s_snapshot (0, 0, 1, "connect", true), 1), NULL, "still stuck");
    s_expect (s_call (notify, s_snapshot (0, 0, 0, "connect", true), 2),
              NOTIF ("okay", STUCK, "consumer 'archive': no worker is stuck any more"), "unstuck");
}

static void
test_an_endpoint_that_stays_disconnected (void **state)
{
    fh_collectd_notify_t *notify = *state;
    s_expect (s_call (notify, s_snapshot (0, 0, 0, "connect", false), 100), NULL, "down");
    s_expect (s_call (notify, s_snapshot (0, 0, 0, "connect", false), 109.9), NULL, "9.9 s");
    s_expect (s_call (notify, s_snapshot (0, 0, 0, "connect", false), 110),
              NOTIF ("warning", ENDPOINT,
                     "bus endpoint 'tcp://bus1:9940': not connected for 10 s (bus.connect)"),
              "10 s");
    s_expect (s_call (notify, s_snapshot (0, 0, 0, "connect", false), 200), NULL, "still");
    s_expect (s_call (notify, s_snapshot (0, 0, 0, "connect", true), 201),
              NOTIF ("okay", ENDPOINT, "bus endpoint 'tcp://bus1:9940': connected"), "connected");
    /* A short drop (a publisher restart) says nothing. */
    s_expect (s_call (notify, s_snapshot (0, 0, 0, "connect", false), 300), NULL, "drop");
    s_expect (s_call (notify, s_snapshot (0, 0, 0, "connect", true), 305), NULL, "back");
    /* A bind endpoint waits for publishers: never a warning. */
    s_expect (s_call (notify, s_snapshot (0, 0, 0, "bind", false), 400), NULL, "bind");
    s_expect (s_call (notify, s_snapshot (0, 0, 0, "bind", false), 900), NULL, "bind later");
}

static void
test_a_lost_batch_is_said_again (void **state)
{
    fh_collectd_notify_t *notify = *state;
    s_expect (s_call (notify, s_snapshot (10, 10, 0, "connect", true), 0), BACKLOG_WARNING,
              "warning");
    s_expect (s_call (notify, s_snapshot (10, 10, 0, "connect", true), 1), NULL, "said");
    fh_collectd_notify_resend (notify);
    char *text = s_call (notify, s_snapshot (10, 10, 0, "connect", true), 2);
    /* The warning again, and the stuck condition it spoke of: okay. */
    assert_non_null (strstr (text, BACKLOG_WARNING));
    assert_non_null (strstr (text, "severity=okay time=1764300000 host=web1 plugin=fanhub "
                                   "plugin_instance=hub1.archive type=count type_instance=stuck"));
    free (text);
    s_expect (s_call (notify, s_snapshot (10, 10, 0, "connect", true), 3), NULL, "once");
}

/* A snapshot whose consumer's plugin is in state (ABI 1.3), with error. */
static fh_metrics_snapshot_t *
s_plugin_state (int64_t state, const char *error)
{
    fh_metrics_snapshot_t *self = s_snapshot (0, 0, 0, "connect", true);
    fh_metrics_set_int (&self->consumers[0], FH_M_PLUGIN_STATE, state);
    if (error)
        assert_int_equal (fh_metrics_set_text (&self->consumers[0].error, error), 0);
    return self;
}

#define STATE_LINE(severity, message) NOTIF (severity, STATE, "consumer 'archive': " message)

static void
test_a_consumer_down_or_halted_then_up (void **state)
{
    fh_collectd_notify_t *notify = *state;
    s_expect (s_call (notify, s_plugin_state (0, NULL), 0), NULL, "up");
    s_expect (s_call (notify, s_plugin_state (1, "worker 0: ImportError: broken"), 1),
              STATE_LINE ("warning", "down: worker 0: ImportError: broken"), "down");
    s_expect (s_call (notify, s_plugin_state (1, "worker 0: still broken"), 2), NULL, "still down");
    s_expect (s_call (notify, s_plugin_state (0, "worker 0: ImportError: broken"), 3),
              STATE_LINE ("okay", "up again"), "up again");
    s_expect (s_call (notify, s_plugin_state (2, NULL), 4),
              STATE_LINE ("warning", "halted: no error given"), "halted without an error");
    s_expect (s_call (notify, s_plugin_state (1, "no interpreter"), 5),
              STATE_LINE ("warning", "down: no interpreter"), "halted, then down");
    /* A state the ABI does not know counts as up. */
    s_expect (s_call (notify, s_plugin_state (7, NULL), 6), STATE_LINE ("okay", "up again"),
              "unknown");
}

/* A call on a snapshot of an unnamed hub whose endpoint has an odd name
   (it stays disconnected), by a host with a space in its name. */
static char *
s_odd_call (fh_collectd_notify_t *notify, double now_s)
{
    fh_metrics_snapshot_t *odd = s_snapshot (0, 0, 0, "connect", false);
    free (odd->hub.name);
    odd->hub.name = NULL;
    assert_int_equal (fh_metrics_set_text (&odd->endpoints[0].name, "ipc:///run/a \"b\""), 0);
    char *text = fh_collectd_notify (notify, odd, "my host", now_s, 1.5);
    fh_metrics_snapshot_destroy (&odd);
    assert_non_null (text);
    return text;
}

/* A consumer a reload removed is forgotten: back, it warns anew. Names
   are made safe as in PUTVAL; quotes in the message are escaped. */
static void
test_forgetting_and_names (void **state)
{
    fh_collectd_notify_t *notify = *state;
    s_expect (s_call (notify, s_snapshot (10, 10, 0, "connect", true), 0), BACKLOG_WARNING,
              "warning");
    fh_metrics_snapshot_t *empty = fh_metrics_snapshot_new ();
    assert_non_null (empty);
    s_expect (s_call (notify, empty, 1), NULL, "removed");
    s_expect (s_call (notify, s_snapshot (10, 10, 0, "connect", true), 2), BACKLOG_WARNING, "back");
    char *okay = s_call (notify, s_snapshot (0, 10, 0, "connect", true), 3);
    assert_non_null (strstr (okay, "severity=okay"));
    free (okay);

    s_expect (s_odd_call (notify, 10), NULL, "down since 10");
    s_expect (s_odd_call (notify, 20),
              "PUTNOTIF severity=warning time=2 host=my_host plugin=fanhub "
              "plugin_instance=endpoint_ipc_run_a_b_ type=bool type_instance=connected "
              "message=\"bus endpoint 'ipc:///run/a \\\"b\\\"': not connected for 10 s "
              "(bus.connect)\"\n",
              "odd names");
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_backlog_warns_once_and_rearms_at_half, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_stuck_warns_then_okay, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_an_endpoint_that_stays_disconnected, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_a_lost_batch_is_said_again, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_a_consumer_down_or_halted_then_up, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_forgetting_and_names, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
