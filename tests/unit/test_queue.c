/*  test_queue - the single-producer single-consumer consumer queue.

    Single-threaded cases pin the semantics (exact capacity, FIFO, close);
    the two-thread case pushes a million messages through a small queue so
    the consumer keeps running dry and sleeping, and checks every one
    arrives once, in order (a lost wake-up hangs it until ctest's timeout).
    Pushes wake a sleeping consumer only every few messages; the ping-pong
    case checks that fh_queue_signal wakes it for a single one.
    Storage grows on demand: a single-threaded case checks the sizes and
    FIFO across a wrapped ring, and a two-thread case grows the ring while
    the consumer reads the old one (run it under TSan).
*/
#include "queue.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

static void
fh_msg_release_test (fh_msg_t *msg)
{
    fh_msg_release (msg, NULL);
}

static fh_msg_t *
make_msg (uint64_t seq)
{
    fh_msg_t *msg = fh_msg_new (NULL, 0, seq, 0);
    assert_non_null (msg);
    atomic_store (&msg->holders, 1);
    return msg;
}

static void
test_capacity_is_exact (void **state)
{
    (void) state;
    size_t capacities[] = {1, 3, 4, 5, 1000};
    for (size_t c = 0; c < sizeof capacities / sizeof capacities[0]; c++) {
        fh_queue_t *queue = fh_queue_new (capacities[c]);
        assert_non_null (queue);
        for (size_t i = 0; i < capacities[c]; i++) {
            assert_false (fh_queue_full (queue));
            assert_true (fh_queue_push (queue, make_msg (i)));
        }
        assert_true (fh_queue_full (queue));
        fh_msg_t *extra = make_msg (99);
        assert_false (fh_queue_push (queue, extra));
        fh_msg_release_test (extra);
        assert_int_equal (fh_queue_size (queue), capacities[c]);
        /* Room again after one pop. */
        fh_msg_t *first = fh_queue_pop (queue);
        assert_int_equal (first->seq, 0);
        fh_msg_release_test (first);
        assert_false (fh_queue_full (queue));
        fh_queue_destroy (&queue); /* releases what is still queued */
        assert_null (queue);
        fh_queue_destroy (&queue);
    }
}

static void
test_fifo_and_close (void **state)
{
    (void) state;
    fh_queue_t *queue = fh_queue_new (8);
    assert_null (fh_queue_pop (queue));
    for (uint64_t round = 0; round < 5; round++) { /* wraps the ring */
        for (uint64_t i = 0; i < 6; i++)
            assert_true (fh_queue_push (queue, make_msg (round * 10 + i)));
        for (uint64_t i = 0; i < 6; i++) {
            assert_true (fh_queue_wait (queue));
            fh_msg_t *msg = fh_queue_pop (queue);
            assert_int_equal (msg->seq, round * 10 + i);
            fh_msg_release_test (msg);
        }
    }
    assert_true (fh_queue_push (queue, make_msg (7)));
    fh_queue_close (queue);
    /* Closed but not empty: wait still answers true until drained. */
    assert_true (fh_queue_wait (queue));
    fh_msg_t *msg = fh_queue_pop (queue);
    fh_msg_release_test (msg);
    assert_false (fh_queue_wait (queue));
    fh_queue_destroy (&queue);
}

enum { STRESS_COUNT = 1000000, STRESS_CAPACITY = 64 };

static void *
stress_consumer (void *arg)
{
    fh_queue_t *queue = arg;
    uint64_t expected = 0;
    uintptr_t bad = 0;
    while (fh_queue_wait (queue)) {
        fh_msg_t *msg;
        while ((msg = fh_queue_pop (queue))) {
            if (msg->seq != expected)
                bad++;
            expected++;
            fh_msg_release_test (msg);
        }
    }
    return (void *) (bad ? UINTPTR_MAX : (uintptr_t) expected);
}

static void
test_two_threads_in_order (void **state)
{
    (void) state;
    fh_queue_t *queue = fh_queue_new (STRESS_CAPACITY);
    pthread_t consumer;
    assert_int_equal (pthread_create (&consumer, NULL, stress_consumer, queue), 0);
    for (uint64_t i = 0; i < STRESS_COUNT; i++) {
        fh_msg_t *msg = make_msg (i);
        while (!fh_queue_push (queue, msg))
            sched_yield ();
        /* Now and then let the consumer run dry and go to sleep. */
        if (i % 1000 == 0)
            sched_yield ();
    }
    fh_queue_close (queue);
    void *result;
    pthread_join (consumer, &result);
    assert_int_equal ((uintptr_t) result, STRESS_COUNT);
    fh_queue_destroy (&queue);
}

/* One message at a time: the consumer has gone back to sleep before
   each push, and only fh_queue_signal can wake it (a push alone does not,
   below its signal interval). */
typedef struct {
    fh_queue_t *queue;
    atomic_uint_fast64_t taken;
} ping_pong_t;

static void *
ping_pong_consumer (void *arg)
{
    ping_pong_t *pp = arg;
    while (fh_queue_wait (pp->queue)) {
        fh_msg_t *msg;
        while ((msg = fh_queue_pop (pp->queue))) {
            fh_msg_release_test (msg);
            atomic_fetch_add (&pp->taken, 1);
        }
    }
    return NULL;
}

static void
test_signal_wakes_a_sleeper (void **state)
{
    (void) state;
    ping_pong_t pp = {.queue = fh_queue_new (1000)};
    atomic_init (&pp.taken, 0);
    pthread_t consumer;
    assert_int_equal (pthread_create (&consumer, NULL, ping_pong_consumer, &pp), 0);
    for (uint64_t i = 0; i < 2000; i++) {
        assert_true (fh_queue_push (pp.queue, make_msg (i)));
        fh_queue_signal (pp.queue);
        fh_queue_signal (pp.queue); /* nothing new: a no-op */
        while (atomic_load (&pp.taken) != i + 1)
            sched_yield ();
    }
    fh_queue_close (pp.queue);
    pthread_join (consumer, NULL);
    assert_int_equal (atomic_load (&pp.taken), 2000);
    fh_queue_destroy (&pp.queue);
}

/* drop-oldest: the producer evicts from the head while the consumer pops.
   Every message must be taken exactly once, by one side or the other. */
static void *
evict_consumer (void *arg)
{
    fh_queue_t *queue = arg;
    uintptr_t taken = 0;
    uint64_t last = 0;
    bool ordered = true;
    while (fh_queue_wait (queue)) {
        fh_msg_t *msg;
        while ((msg = fh_queue_pop (queue))) {
            if (taken && msg->seq <= last)
                ordered = false;
            last = msg->seq;
            taken++;
            fh_msg_release_test (msg);
        }
    }
    return (void *) (ordered ? taken : UINTPTR_MAX);
}

static void
test_evict_races_pop (void **state)
{
    (void) state;
    fh_queue_t *queue = fh_queue_new (8);
    fh_queue_set_evictable (queue);
    pthread_t consumer;
    assert_int_equal (pthread_create (&consumer, NULL, evict_consumer, queue), 0);
    uintptr_t evicted = 0;
    for (uint64_t i = 0; i < STRESS_COUNT; i++) {
        fh_msg_t *msg = make_msg (i);
        if (fh_queue_full (queue)) {
            fh_msg_t *old = fh_queue_evict (queue);
            if (old) {
                evicted++;
                fh_msg_release_test (old);
            }
        }
        while (!fh_queue_push (queue, msg))
            sched_yield ();
    }
    fh_queue_close (queue);
    void *taken;
    pthread_join (consumer, &taken);
    assert_true ((uintptr_t) taken != UINTPTR_MAX); /* in order */
    assert_int_equal ((uintptr_t) taken + evicted, STRESS_COUNT);
    fh_queue_destroy (&queue);
}

/* A large capacity allocates a small ring, doubles it as the backlog
   grows, never past the capacity, and keeps FIFO order across a ring whose
   live slots wrap around its end when it grows. */
static void
test_storage_grows_on_demand (void **state)
{
    (void) state;
    fh_queue_t *queue = fh_queue_new (100000);
    assert_non_null (queue);
    assert_int_equal (fh_queue_slots (queue), 64);
    /* Wrap the ring: 40 in, 40 out, then fill it from slot 40 round. */
    uint64_t next_in = 0, next_out = 0;
    for (int i = 0; i < 40; i++)
        assert_true (fh_queue_push (queue, make_msg (next_in++)));
    for (int i = 0; i < 40; i++) {
        fh_msg_t *msg = fh_queue_pop (queue);
        assert_int_equal (msg->seq, next_out++);
        fh_msg_release_test (msg);
    }
    for (int i = 0; i < 64; i++)
        assert_true (fh_queue_push (queue, make_msg (next_in++)));
    assert_int_equal (fh_queue_slots (queue), 64); /* exactly full, not grown */
    assert_false (fh_queue_full (queue));          /* room by growing... */
    assert_int_equal (fh_queue_slots (queue), 128);
    while (next_in < 100000 + next_out)
        assert_true (fh_queue_push (queue, make_msg (next_in++)));
    assert_int_equal (fh_queue_slots (queue), 131072);
    assert_true (fh_queue_full (queue)); /* ...but never past the capacity */
    fh_msg_t *extra = make_msg (0);
    assert_false (fh_queue_push (queue, extra));
    fh_msg_release_test (extra);
    assert_int_equal (fh_queue_size (queue), 100000);
    for (int i = 0; i < 1000; i++) {
        fh_msg_t *msg = fh_queue_pop (queue);
        assert_int_equal (msg->seq, next_out++);
        fh_msg_release_test (msg);
    }
    fh_queue_destroy (&queue); /* releases the rest, and the old rings */

    fh_queue_t *small = fh_queue_new (5);
    assert_int_equal (fh_queue_slots (small), 8);
    fh_queue_destroy (&small);
}

/* The producer grows the ring while the consumer reads: every message
   arrives once, in order, whichever ring the consumer read it from. */
enum { GROW_COUNT = 300000, GROW_CAPACITY = 1 << 16 };

static void *
slow_consumer (void *arg)
{
    fh_queue_t *queue = arg;
    uint64_t expected = 0;
    uintptr_t bad = 0;
    while (fh_queue_wait (queue)) {
        fh_msg_t *msg;
        while ((msg = fh_queue_pop (queue))) {
            if (msg->seq != expected)
                bad++;
            expected++;
            fh_msg_release_test (msg);
            if (expected % 64 == 0)
                sched_yield (); /* let the backlog build, so the ring grows */
        }
    }
    return (void *) (bad ? UINTPTR_MAX : (uintptr_t) expected);
}

static void
test_growth_races_pop (void **state)
{
    (void) state;
    fh_queue_t *queue = fh_queue_new (GROW_CAPACITY);
    pthread_t consumer;
    assert_int_equal (pthread_create (&consumer, NULL, slow_consumer, queue), 0);
    for (uint64_t i = 0; i < GROW_COUNT; i++) {
        fh_msg_t *msg = make_msg (i);
        while (!fh_queue_push (queue, msg)) {
            fh_queue_signal (queue);
            sched_yield ();
        }
    }
    fh_queue_signal (queue);
    fh_queue_close (queue);
    void *result;
    pthread_join (consumer, &result);
    assert_int_equal ((uintptr_t) result, GROW_COUNT);
    assert_true (fh_queue_slots (queue) > 64); /* it did grow */
    fh_queue_destroy (&queue);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_capacity_is_exact),
        cmocka_unit_test (test_fifo_and_close),
        cmocka_unit_test (test_two_threads_in_order),
        cmocka_unit_test (test_signal_wakes_a_sleeper),
        cmocka_unit_test (test_evict_races_pop),
        cmocka_unit_test (test_storage_grows_on_demand),
        cmocka_unit_test (test_growth_races_pop),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
