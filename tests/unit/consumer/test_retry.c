/*  test_retry - backoff delays, and the consumer's retry loop driven by a
    fake clock: RETRY keeps the message at the head (order holds), waits
    the backoff (recorded, never slept), and gives up after max_attempts.
*/
#include "consumer.h"
#include "host.h"
#include "retry.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "test_dir.h"

static void
test_delays_double_and_cap (void **state)
{
    (void) state;
    fh_retry_config_t config = {.max_attempts = 10, .initial_ms = 100, .max_ms = 1000};
    uint64_t rng = fh_retry_seed (1);
    int64_t expected[] = {100, 200, 400, 800, 1000, 1000};
    for (uint32_t i = 0; i < 6; i++)
        assert_int_equal (fh_retry_delay_ms (&config, i + 1, &rng), expected[i]);
    config.initial_ms = 0;
    assert_int_equal (fh_retry_delay_ms (&config, 3, &rng), 0);
}

static void
test_jitter_stays_in_range_and_varies (void **state)
{
    (void) state;
    fh_retry_config_t config = {.initial_ms = 1000, .max_ms = 1000, .jitter_permille = 200};
    uint64_t rng = fh_retry_seed (7);
    int64_t low = INT64_MAX, high = 0;
    for (int i = 0; i < 10000; i++) {
        int64_t d = fh_retry_delay_ms (&config, 1, &rng);
        assert_true (d >= 800 && d <= 1200);
        low = d < low ? d : low;
        high = d > high ? d : high;
    }
    assert_true (low < 850 && high > 1150); /* it does spread */
}

/* The fake clock: time moves only when the consumer waits. */
typedef struct {
    atomic_llong now;
    int64_t waits[64];
    atomic_int wait_count;
} fake_clock_t;

static int64_t
fake_now (void *arg)
{
    return atomic_load (&((fake_clock_t *) arg)->now);
}

static bool
fake_sleep_until (void *arg, int64_t deadline, atomic_bool *abort)
{
    (void) abort;
    fake_clock_t *clock = arg;
    int n = atomic_load (&clock->wait_count);
    if (n < 64)
        clock->waits[n] = deadline - atomic_load (&clock->now);
    atomic_store (&clock->wait_count, n + 1);
    atomic_store (&clock->now, deadline);
    return true;
}

static fh_msg_t *
make_msg (uint64_t seq)
{
    zmq_msg_t frames[2];
    zmq_msg_init_size (&frames[0], 1);
    memcpy (zmq_msg_data (&frames[0]), "t", 1);
    zmq_msg_init_size (&frames[1], 1);
    memcpy (zmq_msg_data (&frames[1]), "b", 1);
    fh_msg_t *msg = fh_msg_new (frames, 2, seq, 0);
    zmq_msg_close (&frames[0]);
    zmq_msg_close (&frames[1]);
    atomic_store (&msg->holders, 1);
    return msg;
}

static char *
run_flaky (const char *retries, const char *final, size_t max_attempts, fake_clock_t *clock,
           fh_consumer_counts_t *counts)
{
    char dir[128];
    assert_non_null (mkdtemp (test_tmp_template (dir, sizeof dir, "fanhub-test-retry")));
    char path[256];
    snprintf (path, sizeof path, "%s/calls", dir);
    fanhub_option_t *options = fh_option_new (FANHUB_OPTION_MAP, NULL, "t.yaml:1:1");
    fh_option_append (options, "retries", fh_option_new (FANHUB_OPTION_SCALAR, retries, "x"));
    fh_option_append (options, "final", fh_option_new (FANHUB_OPTION_SCALAR, final, "x"));
    fh_option_append (options, "path", fh_option_new (FANHUB_OPTION_SCALAR, path, "x"));
    fh_consumer_config_t config = {
        .name = (char *) "flaky",
        .plugin = (char *) TEST_PLUGIN_DIR "/flaky.so",
        .queue_capacity = 16,
        .options = options,
        .where = (char *) "t.yaml:1:1",
        .workers = 1,
        .retry = {.max_attempts = max_attempts, .initial_ms = 100, .max_ms = 250},
    };
    char err[512];
    fh_consumer_t *consumer
        = fh_consumer_new (&fh_host, &config, 0, SHIPPED_PLUGIN_DIR, err, sizeof err);
    assert_non_null (consumer);
    fh_clock_ops_t ops = {fake_now, fake_sleep_until, clock};
    fh_consumer_set_clock (consumer, &ops);
    for (uint64_t seq = 1; seq <= 3; seq++)
        assert_int_equal (fh_consumer_offer (consumer, make_msg (seq), NULL), FH_OFFER_TAKEN);
    assert_int_equal (fh_consumer_start (consumer, err, sizeof err), 0);
    fh_consumer_close (consumer);
    while (!fh_consumer_ended (consumer))
        usleep (1000);
    fh_consumer_counts (consumer, counts);
    fh_consumer_destroy (&consumer);
    fh_option_destroy (&options);

    FILE *file = fopen (path, "r");
    assert_non_null (file);
    char *calls = calloc (1, 4096);
    size_t n = fread (calls, 1, 4095, file);
    calls[n] = '\0';
    fclose (file);
    unlink (path);
    rmdir (dir);
    return calls;
}

static void
test_retry_keeps_order_and_backs_off (void **state)
{
    (void) state;
    fake_clock_t clock = {0};
    fh_consumer_counts_t counts;
    char *calls = run_flaky ("2", "ok", 5, &clock, &counts);
    /* Each message is retried in place before the next one starts. */
    assert_string_equal (calls, "1 1 retry\n1 2 retry\n1 3 ok\n"
                                "2 1 retry\n2 2 retry\n2 3 ok\n"
                                "3 1 retry\n3 2 retry\n3 3 ok\n");
    free (calls);
    assert_int_equal (atomic_load (&clock.wait_count), 6);
    for (int i = 0; i < 6; i += 2) {
        assert_int_equal (clock.waits[i], 100 * 1000000);
        assert_int_equal (clock.waits[i + 1], 200 * 1000000);
    }
    assert_int_equal (counts.completed, 3);
    assert_int_equal (counts.retried, 6);
    assert_int_equal (counts.failed, 0);
    assert_int_equal (counts.dequeued, 3);
}

static void
test_attempts_run_out (void **state)
{
    (void) state;
    fake_clock_t clock = {0};
    fh_consumer_counts_t counts;
    char *calls = run_flaky ("10", "ok", 3, &clock, &counts);
    assert_string_equal (calls, "1 1 retry\n1 2 retry\n1 3 retry\n"
                                "2 1 retry\n2 2 retry\n2 3 retry\n"
                                "3 1 retry\n3 2 retry\n3 3 retry\n");
    free (calls);
    assert_int_equal (counts.failed, 3);
    assert_int_equal (counts.retried, 6);
    assert_int_equal (counts.completed, 0);
    /* The cap: 100, then 200, never more than max_ms 250. */
    assert_int_equal (clock.waits[1], 200 * 1000000);
}

static void
test_fail_is_not_retried (void **state)
{
    (void) state;
    fake_clock_t clock = {0};
    fh_consumer_counts_t counts;
    char *calls = run_flaky ("0", "fail", 5, &clock, &counts);
    assert_string_equal (calls, "1 1 fail\n2 1 fail\n3 1 fail\n");
    free (calls);
    assert_int_equal (atomic_load (&clock.wait_count), 0);
    assert_int_equal (counts.failed, 3);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_delays_double_and_cap),
        cmocka_unit_test (test_jitter_stays_in_range_and_varies),
        cmocka_unit_test (test_retry_keeps_order_and_backs_off),
        cmocka_unit_test (test_attempts_run_out),
        cmocka_unit_test (test_fail_is_not_retried),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
