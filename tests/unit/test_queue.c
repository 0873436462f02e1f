/*  test_queue - the single-producer single-consumer consumer queue.

    Single-threaded cases pin the semantics (exact capacity, FIFO, close);
    the two-thread case pushes a million messages through a small queue so
    the consumer keeps running dry and sleeping, and checks every one
    arrives once, in order (a lost wake-up hangs it until ctest's timeout).
    Pushes wake a sleeping consumer only every few messages; the ping-pong
    case checks that fh_queue_signal wakes it for a single one. Two stress
    cases hunt lost wake-ups of the futex parking: signals landing at
    random points of the consumer's way to sleep, and kicks from two other
    threads; a wake-up lost fails them at a deadline (run under TSan too).
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
#include <time.h>
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

/* No lost wake-up, under stress: runs of 1-3 pushes and a signal, each
   followed by a random short pause (so that the signal lands anywhere in
   the consumer's path from "empty" to parked), then the producer waits
   for the consumer to take everything. A wake-up lost would leave a
   message queued while its consumer sleeps: the wait below would never
   end (the deadline only bounds that hang). */
enum { WAKE_ROUNDS = 50000 };

static void
wait_taken (atomic_uint_fast64_t *taken, uint64_t count, time_t deadline)
{
    while (atomic_load (taken) != count) {
        if (time (NULL) > deadline)
            fail_msg ("lost wake-up: %llu of %llu taken, the consumer sleeps",
                      (unsigned long long) atomic_load (taken), (unsigned long long) count);
        sched_yield ();
    }
}

static void
test_no_lost_wakeup (void **state)
{
    (void) state;
    ping_pong_t pp = {.queue = fh_queue_new (64)};
    atomic_init (&pp.taken, 0);
    pthread_t consumer;
    assert_int_equal (pthread_create (&consumer, NULL, ping_pong_consumer, &pp), 0);
    uint32_t seed = 7;
    uint64_t pushed = 0;
    time_t deadline = time (NULL) + 120;
    for (int round = 0; round < WAKE_ROUNDS; round++) {
        seed = seed * 1103515245u + 12345u;
        unsigned burst = 1 + (seed >> 16) % 3;
        for (unsigned i = 0; i < burst; i++)
            assert_true (fh_queue_push (pp.queue, make_msg (pushed++)));
        fh_queue_signal (pp.queue);
        for (volatile unsigned spin = (seed >> 20) % 2000; spin; spin--)
            ;
        wait_taken (&pp.taken, pushed, deadline);
    }
    /* The consumer is idle or parked: close must wake it. */
    fh_queue_close (pp.queue);
    pthread_join (consumer, NULL);
    assert_int_equal (atomic_load (&pp.taken), pushed);
    fh_queue_destroy (&pp.queue);
}

/* Kicks from two other threads (pool workers kick the dispatcher's queue)
   while the producer pushes: every kick wakes the consumer, which reports
   the kick count it saw before each wait; a kick lost leaves a kicker
   waiting for that report. */
typedef struct {
    fh_queue_t *queue;
    atomic_uint_fast64_t taken;
    atomic_uint seen_kicks; /* the consumer's last reading, before a wait */
    atomic_bool stop;
} kick_test_t;

static void *
kick_consumer (void *arg)
{
    kick_test_t *kt = arg;
    while (true) {
        unsigned kicks = fh_queue_kicks (kt->queue);
        atomic_store (&kt->seen_kicks, kicks);
        fh_msg_t *msg;
        while ((msg = fh_queue_pop (kt->queue))) {
            fh_msg_release_test (msg);
            atomic_fetch_add (&kt->taken, 1);
        }
        if (!fh_queue_wait_since (kt->queue, kicks))
            break;
    }
    return NULL;
}

static void *
kicker (void *arg)
{
    kick_test_t *kt = arg;
    time_t deadline = time (NULL) + 120;
    while (!atomic_load (&kt->stop)) {
        fh_queue_kick (kt->queue);
        unsigned after = fh_queue_kicks (kt->queue);
        /* The consumer must come round and read a count at least this. */
        while ((int) (atomic_load (&kt->seen_kicks) - after) < 0 && !atomic_load (&kt->stop))
            if (time (NULL) > deadline)
                return (void *) 1;
            else
                sched_yield ();
    }
    return NULL;
}

static void
test_kicks_are_not_lost (void **state)
{
    (void) state;
    kick_test_t kt = {.queue = fh_queue_new (64)};
    atomic_init (&kt.taken, 0);
    atomic_init (&kt.seen_kicks, 0);
    atomic_init (&kt.stop, false);
    pthread_t consumer, kickers[2];
    assert_int_equal (pthread_create (&consumer, NULL, kick_consumer, &kt), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal (pthread_create (&kickers[i], NULL, kicker, &kt), 0);
    time_t deadline = time (NULL) + 120;
    uint64_t pushed = 0;
    for (int round = 0; round < WAKE_ROUNDS / 5; round++) {
        assert_true (fh_queue_push (kt.queue, make_msg (pushed++)));
        fh_queue_signal (kt.queue);
        wait_taken (&kt.taken, pushed, deadline);
    }
    atomic_store (&kt.stop, true);
    for (int i = 0; i < 2; i++) {
        void *lost;
        pthread_join (kickers[i], &lost);
        assert_null (lost);
    }
    fh_queue_close (kt.queue);
    pthread_join (consumer, NULL);
    assert_true (atomic_load (&kt.seen_kicks) > 0);
    fh_queue_destroy (&kt.queue);
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
        cmocka_unit_test (test_no_lost_wakeup),
        cmocka_unit_test (test_kicks_are_not_lost),
        cmocka_unit_test (test_evict_races_pop),
        cmocka_unit_test (test_storage_grows_on_demand),
        cmocka_unit_test (test_growth_races_pop),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
