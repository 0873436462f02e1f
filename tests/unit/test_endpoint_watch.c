/*  test_endpoint_watch - the bus endpoints' state from monitor events,
    driven by hand-made events and a fake clock: the cause of each kind of
    failure, the "not connected" warning's time and its doubling gap, a
    connect and a disconnect, a failed handshake's backoff, bind
    endpoints.
*/
#include "endpoint_watch.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <zmq.h>
#include <cmocka.h>

#define S INT64_C (1000000000)
#define MS INT64_C (1000000)

static const char *const s_connect[] = {"tcp://bus.example.invalid:9940", "tcp://127.0.0.1:1"};
static const char *const s_bind[] = {"tcp://127.0.0.1:9941"};

static fh_endpoint_watch_t *
s_watch (int64_t warn_after_ns)
{
    fh_endpoint_watch_t *w
        = fh_endpoint_watch_new (s_connect, 2, s_bind, 1, false, warn_after_ns, 1000 * S);
    assert_non_null (w);
    return w;
}

static fh_endpoint_status_t
s_read (fh_endpoint_watch_t *w, size_t i)
{
    fh_endpoint_status_t status;
    fh_endpoint_watch_read (w, i, &status);
    return status;
}

static void
test_causes (void **state)
{
    (void) state;
    fh_endpoint_watch_t *w = s_watch (10 * S);
    /* No socket opened between two retries: the name did not resolve. */
    fh_endpoint_watch_event (w, 0, ZMQ_EVENT_CONNECT_RETRIED, 100, 1000 * S);
    fh_endpoint_watch_event (w, 0, ZMQ_EVENT_CONNECT_RETRIED, 100, 1000 * S + 100 * MS);
    assert_string_equal (s_read (w, 0).last_error, "name not resolved");
    /* Opened, then closed: refused. */
    fh_endpoint_watch_event (w, 1, ZMQ_EVENT_CONNECT_DELAYED, 115, 1000 * S);
    fh_endpoint_watch_event (w, 1, ZMQ_EVENT_CLOSED, 12, 1000 * S);
    fh_endpoint_watch_event (w, 1, ZMQ_EVENT_CONNECT_RETRIED, 100, 1000 * S);
    fh_endpoint_status_t refused = s_read (w, 1);
    assert_string_equal (refused.last_error, "connection refused or unreachable");
    assert_false (refused.connected);
    assert_int_equal (refused.since_ns, 1000 * S);
    fh_endpoint_watch_destroy (&w);
    fh_endpoint_watch_destroy (&w); /* safe twice */
}

static void
test_warning_time_and_gap (void **state)
{
    (void) state;
    fh_endpoint_watch_t *w = s_watch (10 * S);
    assert_int_equal (fh_endpoint_watch_timeout_ms (w, 1000 * S), 10000);
    assert_int_equal (fh_endpoint_watch_due (w, 1009 * S), SIZE_MAX);
    assert_int_equal (fh_endpoint_watch_timeout_ms (w, 1009 * S), 1000);
    /* Due at 10 s: warned, the next one 20 s later, then 40 s. */
    assert_int_equal (fh_endpoint_watch_due (w, 1010 * S), SIZE_MAX);
    assert_int_equal (fh_endpoint_watch_timeout_ms (w, 1010 * S), 20000);
    assert_int_equal (fh_endpoint_watch_due (w, 1030 * S), SIZE_MAX);
    assert_int_equal (fh_endpoint_watch_timeout_ms (w, 1030 * S), 40000);
    /* Both connect: nothing is pending any more. */
    fh_endpoint_watch_event (w, 0, ZMQ_EVENT_HANDSHAKE_SUCCEEDED, 0, 1031 * S);
    fh_endpoint_watch_event (w, 1, ZMQ_EVENT_HANDSHAKE_SUCCEEDED, 0, 1031 * S);
    assert_int_equal (fh_endpoint_watch_timeout_ms (w, 1031 * S), -1);
    fh_endpoint_status_t up = s_read (w, 0);
    assert_true (up.connected);
    assert_int_equal (up.since_ns, 1031 * S);
    /* A disconnect: not connected since then, warned warn_after later. */
    fh_endpoint_watch_event (w, 0, ZMQ_EVENT_DISCONNECTED, 17, 1040 * S);
    fh_endpoint_status_t down = s_read (w, 0);
    assert_false (down.connected);
    assert_int_equal (down.since_ns, 1040 * S);
    assert_string_equal (down.last_error, "disconnected");
    assert_int_equal (fh_endpoint_watch_timeout_ms (w, 1040 * S), 10000);
    fh_endpoint_watch_destroy (&w);
}

static void
test_no_warning_when_off (void **state)
{
    (void) state;
    fh_endpoint_watch_t *w = s_watch (0);
    assert_int_equal (fh_endpoint_watch_timeout_ms (w, 1000 * S), -1);
    assert_int_equal (fh_endpoint_watch_due (w, 5000 * S), SIZE_MAX);
    fh_endpoint_watch_destroy (&w);
}

static void
test_failed_handshake_backs_off (void **state)
{
    (void) state;
    fh_endpoint_watch_t *w = s_watch (0);
    int64_t now = 1000 * S;
    int64_t gaps[] = {250 * MS, 500 * MS, 1 * S, 2 * S, 4 * S, 8 * S, 10 * S, 10 * S};
    for (size_t k = 0; k < sizeof gaps / sizeof gaps[0]; k++) {
        fh_endpoint_watch_event (w, 1, ZMQ_EVENT_CONNECTED, 17, now);
        assert_true (fh_endpoint_watch_event (w, 1, ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL,
                                              ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH, now));
        /* The disconnect of a connection that never shook hands changes nothing. */
        assert_false (fh_endpoint_watch_event (w, 1, ZMQ_EVENT_DISCONNECTED, 17, now));
        assert_int_equal (fh_endpoint_watch_timeout_ms (w, now), gaps[k] / MS);
        assert_int_equal (fh_endpoint_watch_due (w, now + gaps[k] - 1), SIZE_MAX);
        assert_int_equal (fh_endpoint_watch_due (w, now + gaps[k]), 1);        /* connect again */
        assert_int_equal (fh_endpoint_watch_due (w, now + gaps[k]), SIZE_MAX); /* once */
        now += gaps[k];
    }
    fh_endpoint_status_t status = s_read (w, 1);
    assert_int_equal (status.handshake_failures, 8);
    assert_non_null (strstr (status.last_error, "security mechanism mismatch"));
    /* A success ends the streak: the next failure waits 250 ms again. */
    fh_endpoint_watch_event (w, 1, ZMQ_EVENT_HANDSHAKE_SUCCEEDED, 0, now);
    assert_true (fh_endpoint_watch_event (w, 1, ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL, 32, now));
    assert_int_equal (fh_endpoint_watch_timeout_ms (w, now), 250);
    assert_non_null (strstr (s_read (w, 1).last_error, "the peer closed the connection"));
    assert_true (fh_endpoint_watch_event (w, 1, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, 400, now));
    assert_non_null (strstr (s_read (w, 1).last_error, "ZAP status 400"));
    fh_endpoint_watch_destroy (&w);
}

static void
test_bind_endpoint (void **state)
{
    (void) state;
    fh_endpoint_watch_t *w = s_watch (10 * S);
    fh_endpoint_watch_peers (w, 2, 1, 1001 * S);
    assert_true (s_read (w, 2).connected);
    fh_endpoint_watch_peers (w, 2, 2, 1002 * S);
    assert_int_equal (s_read (w, 2).since_ns, 1001 * S); /* still connected */
    fh_endpoint_watch_peers (w, 2, 0, 1003 * S);
    assert_false (s_read (w, 2).connected);
    /* A refused peer is counted, never disconnected nor warned about. */
    assert_false (fh_endpoint_watch_event (w, 2, ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL,
                                           ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC, 1004 * S));
    assert_int_equal (s_read (w, 2).handshake_failures, 1);
    assert_non_null (strstr (s_read (w, 2).last_error, "could not decrypt"));
    fh_endpoint_watch_note (w, 2, "a note");
    assert_string_equal (s_read (w, 2).last_error, "a note");
    /* Out of range: nothing, and zeros. */
    assert_false (fh_endpoint_watch_event (w, 3, ZMQ_EVENT_CLOSED, 0, 1005 * S));
    assert_int_equal (s_read (w, 3).since_ns, 0);
    fh_endpoint_watch_destroy (&w);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_causes),
        cmocka_unit_test (test_warning_time_and_gap),
        cmocka_unit_test (test_no_warning_when_off),
        cmocka_unit_test (test_failed_handshake_backs_off),
        cmocka_unit_test (test_bind_endpoint),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
