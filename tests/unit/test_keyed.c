/*  test_keyed - the per-key scheduler of a consumer's worker pool.

    The tests of xapi's work queues and Gitpod's event worker pool, made
    deterministic: workers are simulated (a seeded RNG picks what happens
    next: a push, a take by a free worker, or which message in progress
    finishes) and time is the now_ns each call is given. Per-key order is
    checked in execution order, as the log of (key, seq, start, end) was
    written, never after sorting. The last case runs real threads around
    one mutex so TSan sees the scheduler used the way the hub uses it.
*/
#include "keyed.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* splitmix64: a seeded RNG that is the same everywhere. */
static uint64_t
rng_next (uint64_t *state)
{
    uint64_t z = (*state += UINT64_C (0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static size_t
rng_below (uint64_t *state, size_t n)
{
    return (size_t) (rng_next (state) % n);
}

static fh_msg_t *
make_msg (uint64_t seq)
{
    fh_msg_t *msg = fh_msg_new (NULL, 0, seq, 0);
    assert_non_null (msg);
    atomic_store (&msg->holders, 1);
    return msg;
}

/* A release callback that counts into *arg. */
static void
count_release (fh_msg_t *msg, void *arg)
{
    (*(size_t *) arg)++;
    fh_msg_release (msg, NULL);
}

/* Pushes msg under a short text key; no message is replaced. */
static void
push (fh_keyed_t *keyed, const char *key, fh_msg_t *msg)
{
    fh_msg_t *replaced;
    assert_int_equal (fh_keyed_push (keyed, key, strlen (key), msg, &replaced), 0);
    assert_null (replaced);
}

static fh_msg_t *
take (fh_keyed_t *keyed, int64_t now, fh_keyed_slot_t **slot)
{
    return fh_keyed_take (keyed, now, slot, NULL);
}

static void
finish (fh_keyed_t *keyed, fh_keyed_slot_t *slot, fh_msg_t *msg)
{
    fh_keyed_release (keyed, slot);
    fh_msg_release (msg, NULL);
}

/* The randomized simulation: N workers, K keys, retries, a fake clock. */

typedef struct {
    uint32_t key, kseq, attempt;
    uint64_t start, end; /* steps; end 0 while running */
} run_t;

typedef struct {
    fh_keyed_slot_t *slot;
    fh_msg_t *msg;
    size_t run; /* index in the log */
} worker_t;

enum { MAX_RETRIES = 3 };

static void
simulate (uint64_t seed, bool coalesce)
{
    uint64_t rng = seed;
    size_t nkeys = 1 + rng_below (&rng, 60);
    size_t nmsgs = 2000 + rng_below (&rng, 2000);
    size_t nworkers = 1 + rng_below (&rng, 8);
    size_t retry_pct = rng_below (&rng, 15);

    fh_keyed_t *keyed = fh_keyed_new (coalesce);
    assert_non_null (keyed);
    fh_msg_t **msgs = calloc (nmsgs, sizeof *msgs);
    uint32_t *key_of = calloc (nmsgs, sizeof *key_of);
    uint32_t *kseq_of = calloc (nmsgs, sizeof *kseq_of);
    uint32_t *done = calloc (nmsgs, sizeof *done);
    uint32_t *replaced = calloc (nmsgs, sizeof *replaced);
    bool *started = calloc (nmsgs, sizeof *started);
    uint32_t *attempts = calloc (nmsgs, sizeof *attempts);
    uint32_t *next_kseq = calloc (nkeys, sizeof *next_kseq);
    run_t *log = calloc (nmsgs * (MAX_RETRIES + 1), sizeof *log);
    worker_t *workers = calloc (nworkers, sizeof *workers);
    size_t busy = 0, runs = 0, pushed = 0, finished = 0;
    int64_t now = 0;
    uint64_t step = 0;

    while (finished < nmsgs) {
        step++;
        now++;
        size_t action = rng_below (&rng, 3);
        if (action == 0 && pushed < nmsgs) {
            for (size_t burst = 1 + rng_below (&rng, 5); burst && pushed < nmsgs; burst--) {
                size_t i = pushed++;
                uint32_t key = (uint32_t) rng_below (&rng, nkeys);
                msgs[i] = make_msg (i);
                key_of[i] = key;
                kseq_of[i] = next_kseq[key]++;
                char name[32];
                int size = snprintf (name, sizeof name, "key-%u", key);
                fh_msg_t *old;
                assert_int_equal (fh_keyed_push (keyed, name, (size_t) size, msgs[i], &old), 0);
                if (old) {
                    assert_true (coalesce);
                    size_t o = old->seq;
                    assert_ptr_equal (msgs[o], old);
                    assert_false (started[o]); /* a started one is never replaced */
                    assert_int_equal (key_of[o], key);
                    replaced[o]++;
                    finished++;
                    fh_msg_release (old, NULL);
                }
            }
        }
        else if (action == 1 && busy < nworkers) {
            fh_keyed_slot_t *slot;
            int64_t due;
            fh_msg_t *msg = fh_keyed_take (keyed, now, &slot, &due);
            if (!msg) {
                if (busy == 0 && pushed == nmsgs) {
                    /* Only delayed keys are left: jump the clock. */
                    assert_true (due != INT64_MAX);
                    assert_true (due > now);
                    now = due - 1;
                }
                continue;
            }
            size_t i = msg->seq;
            assert_true (i < pushed);
            assert_ptr_equal (msgs[i], msg);
            assert_int_equal (done[i] + replaced[i], 0);
            assert_int_equal (fh_keyed_slot_retries (slot), attempts[i]);
            started[i] = true;
            workers[busy] = (worker_t){slot, msg, runs};
            log[runs++] = (run_t){key_of[i], kseq_of[i], attempts[i], step, 0};
            busy++;
        }
        else if (action == 2 && busy > 0) {
            size_t w = rng_below (&rng, busy);
            worker_t worker = workers[w];
            workers[w] = workers[--busy];
            size_t i = worker.msg->seq;
            log[worker.run].end = step;
            if (attempts[i] < MAX_RETRIES && rng_below (&rng, 100) < retry_pct) {
                attempts[i]++;
                fh_keyed_retry (keyed, worker.slot, now + (int64_t) rng_below (&rng, 40));
            }
            else {
                done[i]++;
                finished++;
                finish (keyed, worker.slot, worker.msg);
            }
        }
        assert_int_equal (fh_keyed_busy (keyed), busy);
    }

    /* Per key, in execution order: (seq, attempt) strictly increases and
       a run starts only after the key's previous run ended. */
    uint64_t *last_end = calloc (nkeys, sizeof *last_end);
    int64_t *last_kseq = malloc (nkeys * sizeof *last_kseq);
    uint32_t *last_attempt = calloc (nkeys, sizeof *last_attempt);
    for (size_t k = 0; k < nkeys; k++)
        last_kseq[k] = -1;
    for (size_t r = 0; r < runs; r++) {
        const run_t *run = &log[r];
        assert_true (run->end > run->start);
        assert_true (run->start > last_end[run->key]);
        if (run->kseq == last_kseq[run->key])
            assert_true (run->attempt == last_attempt[run->key] + 1);
        else {
            assert_true ((int64_t) run->kseq > last_kseq[run->key]);
            assert_int_equal (run->attempt, 0);
            if (!coalesce)
                assert_int_equal (run->kseq, last_kseq[run->key] + 1); /* no gaps */
        }
        last_kseq[run->key] = run->kseq;
        last_attempt[run->key] = run->attempt;
        last_end[run->key] = run->end;
    }
    /* Exactly once: done, or (coalescing) replaced and handed back. */
    for (size_t i = 0; i < nmsgs; i++) {
        assert_int_equal (done[i] + replaced[i], 1);
        if (!coalesce)
            assert_int_equal (replaced[i], 0);
    }
    assert_int_equal (fh_keyed_queued (keyed), 0);
    assert_int_equal (fh_keyed_keys (keyed), 0);
    assert_int_equal (fh_keyed_delayed (keyed), 0);
    assert_int_equal (fh_keyed_max_key_backlog (keyed), 0);
    assert_true (fh_keyed_live_entries (keyed) <= FH_KEYED_SPARE_ENTRIES);
    fh_keyed_destroy (&keyed, NULL, NULL);
    free (last_end);
    free (last_kseq);
    free (last_attempt);
    free (msgs);
    free (key_of);
    free (kseq_of);
    free (done);
    free (replaced);
    free (started);
    free (attempts);
    free (next_kseq);
    free (log);
    free (workers);
}

static void
test_order_in_execution_order (void **state)
{
    (void) state;
    for (uint64_t seed = 1; seed <= 200; seed++)
        simulate (seed, false);
}

static void
test_order_with_coalescing (void **state)
{
    (void) state;
    for (uint64_t seed = 1001; seed <= 1100; seed++)
        simulate (seed, true);
}

static void
test_no_cross_key_blocking (void **state)
{
    (void) state;
    fh_keyed_t *keyed = fh_keyed_new (false);
    fh_msg_t *a1 = make_msg (1), *a2 = make_msg (2), *b1 = make_msg (3);
    push (keyed, "A", a1);
    push (keyed, "A", a2);
    push (keyed, "B", b1);
    fh_keyed_slot_t *slot_a, *slot_b, *slot;
    assert_ptr_equal (take (keyed, 0, &slot_a), a1);
    /* Worker 2: A is busy, so B's message starts while A's runs. */
    assert_ptr_equal (take (keyed, 0, &slot_b), b1);
    assert_int_equal (fh_keyed_busy (keyed), 2);
    /* A third worker finds nothing: A2 waits for A1. */
    assert_null (take (keyed, 0, &slot));
    assert_null (slot);
    /* B ends first; A still blocks only its own key. */
    finish (keyed, slot_b, b1);
    assert_null (take (keyed, 0, &slot));
    finish (keyed, slot_a, a1);
    assert_ptr_equal (take (keyed, 0, &slot), a2);
    finish (keyed, slot, a2);
    assert_int_equal (fh_keyed_keys (keyed), 0);
    fh_keyed_destroy (&keyed, NULL, NULL);
    assert_null (keyed);
    fh_keyed_destroy (&keyed, NULL, NULL);
}

static void
test_keys_take_turns (void **state)
{
    (void) state;
    /* Five keys, pushed one key after another: served 0,1,2,3,4,0,1,... */
    enum { KEYS = 5, EACH = 100 };
    fh_keyed_t *keyed = fh_keyed_new (false);
    for (int k = 0; k < KEYS; k++)
        for (int i = 0; i < EACH; i++) {
            char key[8];
            snprintf (key, sizeof key, "k%d", k);
            push (keyed, key, make_msg ((uint64_t) (k * EACH + i)));
        }
    assert_int_equal (fh_keyed_max_key_backlog (keyed), EACH);
    for (int t = 0; t < KEYS * EACH; t++) {
        fh_keyed_slot_t *slot;
        fh_msg_t *msg = take (keyed, 0, &slot);
        assert_non_null (msg);
        uint64_t key = msg->seq / EACH, nth = msg->seq % EACH;
        assert_int_equal (key, (uint64_t) (t % KEYS));
        assert_int_equal (nth, (uint64_t) (t / KEYS));
        finish (keyed, slot, msg);
    }
    assert_int_equal (fh_keyed_keys (keyed), 0);
    fh_keyed_destroy (&keyed, NULL, NULL);
}

static void
test_cold_keys_beside_a_hot_one (void **state)
{
    (void) state;
    /* 10,000 messages of one key, then one message for each of 10 cold
       keys: one worker starts every cold message within 11 takes. */
    enum { HOT = 10000, COLD = 10, BOUND = COLD + 1 };
    fh_keyed_t *keyed = fh_keyed_new (false);
    for (uint64_t i = 0; i < HOT; i++)
        push (keyed, "hot", make_msg (i));
    for (uint64_t c = 0; c < COLD; c++) {
        char key[16];
        snprintf (key, sizeof key, "cold-%u", (unsigned) c);
        push (keyed, key, make_msg (HOT + c));
    }
    size_t cold_started = 0;
    for (size_t t = 1; t <= HOT + COLD; t++) {
        fh_keyed_slot_t *slot;
        fh_msg_t *msg = take (keyed, 0, &slot);
        assert_non_null (msg);
        if (msg->seq >= HOT) {
            assert_true (t <= BOUND);
            cold_started++;
        }
        finish (keyed, slot, msg);
    }
    assert_int_equal (cold_started, COLD);

    /* A cold message arriving while the hot key drains: one worker starts
       it after at most the one hot message in progress; a second worker
       starts it at once. */
    uint64_t rng = 42;
    size_t hot_done = 0;
    for (uint64_t i = 0; i < 100000; i++)
        push (keyed, "hot", make_msg (i));
    for (int workers = 1; workers <= 2; workers++) {
        for (int round = 0; round < 50; round++) {
            fh_keyed_slot_t *hot_slot;
            fh_msg_t *hot = take (keyed, 0, &hot_slot);
            assert_non_null (hot);
            size_t steps = rng_below (&rng, 20);
            for (size_t s = 0; s < steps; s++) { /* the hot key works on */
                finish (keyed, hot_slot, hot);
                hot_done++;
                hot = take (keyed, 0, &hot_slot);
                assert_non_null (hot);
            }
            fh_msg_t *cold = make_msg (UINT64_MAX);
            push (keyed, "cold", cold);
            fh_keyed_slot_t *slot;
            if (workers == 2) /* the free worker takes it now */
                assert_ptr_equal (take (keyed, 0, &slot), cold);
            else {
                finish (keyed, hot_slot, hot);
                hot_done++;
                hot = NULL;
                assert_ptr_equal (take (keyed, 0, &slot), cold);
            }
            finish (keyed, slot, cold);
            if (hot) {
                finish (keyed, hot_slot, hot);
                hot_done++;
            }
        }
    }
    assert_int_equal (fh_keyed_key_backlog_high (keyed), 100000);
    size_t released_count = 0;
    fh_keyed_destroy (&keyed, count_release, &released_count);
    assert_int_equal (released_count, 100000 - hot_done);
}

static void
test_coalescing (void **state)
{
    (void) state;
    fh_keyed_t *keyed = fh_keyed_new (true);
    fh_msg_t *m[10];
    for (int i = 0; i < 10; i++)
        m[i] = make_msg ((uint64_t) i);
    fh_msg_t *replaced;
    /* Queued, never started: each newer replaces the older, in place. */
    assert_int_equal (fh_keyed_push (keyed, "k", 1, m[0], &replaced), 0);
    assert_null (replaced);
    push (keyed, "other", m[9]);
    assert_int_equal (fh_keyed_push (keyed, "k", 1, m[1], &replaced), 0);
    assert_ptr_equal (replaced, m[0]);
    fh_msg_release (replaced, NULL);
    assert_int_equal (fh_keyed_push (keyed, "k", 1, m[2], &replaced), 0);
    assert_ptr_equal (replaced, m[1]);
    fh_msg_release (replaced, NULL);
    assert_int_equal (fh_keyed_queued (keyed), 2);
    /* k kept its turn ahead of "other". */
    fh_keyed_slot_t *slot, *other_slot;
    assert_ptr_equal (take (keyed, 0, &slot), m[2]);
    assert_ptr_equal (take (keyed, 0, &other_slot), m[9]);
    finish (keyed, other_slot, m[9]);
    /* Started: m[2] is never replaced; m[3] queues behind it, and m[4]
       replaces m[3]. */
    assert_int_equal (fh_keyed_push (keyed, "k", 1, m[3], &replaced), 0);
    assert_null (replaced);
    assert_int_equal (fh_keyed_push (keyed, "k", 1, m[4], &replaced), 0);
    assert_ptr_equal (replaced, m[3]);
    fh_msg_release (replaced, NULL);
    /* Retried: m[2] waits at the head, started, so still never replaced. */
    fh_keyed_retry (keyed, slot, 100);
    assert_int_equal (fh_keyed_push (keyed, "k", 1, m[5], &replaced), 0);
    assert_ptr_equal (replaced, m[4]);
    fh_msg_release (replaced, NULL);
    assert_int_equal (fh_keyed_queued (keyed), 2);
    assert_null (take (keyed, 99, &slot));
    assert_ptr_equal (take (keyed, 100, &slot), m[2]);
    assert_int_equal (fh_keyed_slot_retries (slot), 1);
    finish (keyed, slot, m[2]);
    assert_ptr_equal (take (keyed, 100, &slot), m[5]);
    assert_int_equal (fh_keyed_slot_retries (slot), 0);
    finish (keyed, slot, m[5]);
    /* Retried with nothing behind it: the next push queues behind. */
    assert_int_equal (fh_keyed_push (keyed, "k", 1, m[6], &replaced), 0);
    assert_ptr_equal (take (keyed, 0, &slot), m[6]);
    fh_keyed_retry (keyed, slot, 0);
    assert_int_equal (fh_keyed_push (keyed, "k", 1, m[7], &replaced), 0);
    assert_null (replaced);
    assert_int_equal (fh_keyed_push (keyed, "k", 1, m[8], &replaced), 0);
    assert_ptr_equal (replaced, m[7]);
    fh_msg_release (replaced, NULL);
    assert_ptr_equal (take (keyed, 0, &slot), m[6]);
    finish (keyed, slot, m[6]);
    assert_ptr_equal (take (keyed, 0, &slot), m[8]);
    finish (keyed, slot, m[8]);
    assert_int_equal (fh_keyed_keys (keyed), 0);
    fh_keyed_destroy (&keyed, NULL, NULL);

    /* Without coalescing nothing is ever replaced. */
    keyed = fh_keyed_new (false);
    for (int i = 0; i < 5; i++)
        push (keyed, "k", make_msg ((uint64_t) i));
    assert_int_equal (fh_keyed_queued (keyed), 5);
    size_t released_count = 0;
    fh_keyed_destroy (&keyed, count_release, &released_count);
    assert_int_equal (released_count, 5);
}

static void
test_retry_keeps_order_and_blocks_only_its_key (void **state)
{
    (void) state;
    fh_keyed_t *keyed = fh_keyed_new (false);
    fh_msg_t *a1 = make_msg (1), *a2 = make_msg (2), *a3 = make_msg (3);
    fh_msg_t *b1 = make_msg (11), *b2 = make_msg (12);
    push (keyed, "A", a1);
    push (keyed, "A", a2);
    push (keyed, "A", a3);
    push (keyed, "B", b1);
    push (keyed, "B", b2);
    fh_keyed_slot_t *slot;
    int64_t due;
    assert_ptr_equal (fh_keyed_take (keyed, 0, &slot, &due), a1);
    assert_int_equal (due, INT64_MAX);
    assert_int_equal (fh_keyed_slot_retries (slot), 0);
    fh_keyed_retry (keyed, slot, 1000);
    assert_int_equal (fh_keyed_delayed (keyed), 1);
    assert_int_equal (fh_keyed_queued (keyed), 5);
    assert_int_equal (fh_keyed_max_key_backlog (keyed), 3);
    /* B is not held up by A's delay. */
    assert_ptr_equal (fh_keyed_take (keyed, 10, &slot, &due), b1);
    assert_int_equal (due, 1000);
    finish (keyed, slot, b1);
    assert_ptr_equal (fh_keyed_take (keyed, 20, &slot, &due), b2);
    finish (keyed, slot, b2);
    /* A stays blocked until its not_before, a2 and a3 included. */
    assert_null (fh_keyed_take (keyed, 999, &slot, &due));
    assert_int_equal (due, 1000);
    /* Then the retried message is the next of its key. */
    assert_ptr_equal (fh_keyed_take (keyed, 1000, &slot, &due), a1);
    assert_int_equal (due, INT64_MAX);
    assert_int_equal (fh_keyed_slot_retries (slot), 1);
    fh_keyed_retry (keyed, slot, 2000);
    assert_ptr_equal (fh_keyed_take (keyed, 2500, &slot, &due), a1);
    assert_int_equal (fh_keyed_slot_retries (slot), 2);
    finish (keyed, slot, a1);
    assert_ptr_equal (take (keyed, 2500, &slot), a2);
    assert_int_equal (fh_keyed_slot_retries (slot), 0);
    finish (keyed, slot, a2);
    assert_ptr_equal (take (keyed, 2500, &slot), a3);
    finish (keyed, slot, a3);
    assert_int_equal (fh_keyed_keys (keyed), 0);
    assert_int_equal (fh_keyed_delayed (keyed), 0);

    /* Keys due at once join the ready ring's tail, earliest first, ties in
       the order they were retried, behind keys already waiting. */
    fh_msg_t *c = make_msg (21), *d = make_msg (22), *e = make_msg (23), *f = make_msg (24);
    fh_keyed_slot_t *sc, *sd, *se;
    push (keyed, "C", c);
    push (keyed, "D", d);
    push (keyed, "E", e);
    assert_ptr_equal (take (keyed, 0, &sc), c);
    assert_ptr_equal (take (keyed, 0, &sd), d);
    assert_ptr_equal (take (keyed, 0, &se), e);
    fh_keyed_retry (keyed, se, 50);
    fh_keyed_retry (keyed, sc, 50);
    fh_keyed_retry (keyed, sd, 40);
    push (keyed, "F", f);
    assert_ptr_equal (take (keyed, 60, &slot), f);
    finish (keyed, slot, f);
    assert_ptr_equal (take (keyed, 60, &slot), d);
    finish (keyed, slot, d);
    assert_ptr_equal (take (keyed, 60, &slot), e);
    finish (keyed, slot, e);
    assert_ptr_equal (take (keyed, 60, &slot), c);
    finish (keyed, slot, c);
    assert_int_equal (fh_keyed_keys (keyed), 0);

    /* Many keys due at the same time: in the order they were retried. */
    enum { TIED = 16 };
    fh_msg_t *tied[TIED];
    fh_keyed_slot_t *tied_slot[TIED];
    for (int k = 0; k < TIED; k++) {
        char key[8];
        snprintf (key, sizeof key, "t%d", k);
        tied[k] = make_msg ((uint64_t) k);
        push (keyed, key, tied[k]);
    }
    for (int k = 0; k < TIED; k++)
        assert_ptr_equal (take (keyed, 0, &tied_slot[k]), tied[k]);
    for (int i = 0; i < TIED; i++) /* a scrambled order: 7i mod 16 */
        fh_keyed_retry (keyed, tied_slot[(7 * i) % TIED], 500);
    for (int i = 0; i < TIED; i++) {
        assert_ptr_equal (take (keyed, 500, &slot), tied[(7 * i) % TIED]);
        finish (keyed, slot, tied[(7 * i) % TIED]);
    }
    fh_keyed_destroy (&keyed, NULL, NULL);
}

static void
test_idle_keys_leave_nothing (void **state)
{
    (void) state;
    enum { KEYS = 10000 };
    fh_keyed_t *keyed = fh_keyed_new (false);
    /* Long keys too: they own a separate copy. */
    for (int round = 0; round < 2; round++) {
        for (uint64_t i = 0; i < KEYS; i++) {
            static const char *const prefix[]
                = {"k", "a-key-long-enough-not-to-fit-inside-its-entry-itself"};
            char key[128];
            int size = snprintf (key, sizeof key, "%s-%llu", prefix[round], (unsigned long long) i);
            fh_msg_t *replaced;
            assert_int_equal (fh_keyed_push (keyed, key, (size_t) size, make_msg (i), &replaced),
                              0);
        }
        /* The empty key is a key like any other. */
        push (keyed, "", make_msg (KEYS));
        assert_int_equal (fh_keyed_keys (keyed), KEYS + 1);
        assert_int_equal (fh_keyed_max_key_backlog (keyed), 1);
        fh_keyed_slot_t *slot;
        fh_msg_t *msg;
        size_t taken = 0;
        while ((msg = take (keyed, 0, &slot))) {
            finish (keyed, slot, msg);
            taken++;
            assert_true (fh_keyed_live_entries (keyed)
                         <= fh_keyed_keys (keyed) + FH_KEYED_SPARE_ENTRIES);
        }
        assert_int_equal (taken, KEYS + 1);
        assert_int_equal (fh_keyed_keys (keyed), 0);
        assert_int_equal (fh_keyed_queued (keyed), 0);
        assert_int_equal (fh_keyed_busy (keyed), 0);
        assert_int_equal (fh_keyed_max_key_backlog (keyed), 0);
        assert_true (fh_keyed_live_entries (keyed) <= FH_KEYED_SPARE_ENTRIES);
        assert_true (fh_keyed_live_nodes (keyed) <= FH_KEYED_SPARE_NODES);
    }
    /* A steady trickle reuses the spares: nothing grows. */
    size_t entries = fh_keyed_live_entries (keyed), nodes = fh_keyed_live_nodes (keyed);
    for (uint64_t i = 0; i < 100000; i++) {
        char key[16];
        snprintf (key, sizeof key, "t%llu", (unsigned long long) i);
        push (keyed, key, make_msg (i));
        fh_keyed_slot_t *slot;
        fh_msg_t *msg = take (keyed, 0, &slot);
        finish (keyed, slot, msg);
        assert_int_equal (fh_keyed_live_entries (keyed), entries);
        assert_int_equal (fh_keyed_live_nodes (keyed), nodes);
    }
    fh_keyed_destroy (&keyed, NULL, NULL);
}

static void
test_backlog_figures (void **state)
{
    (void) state;
    fh_keyed_t *keyed = fh_keyed_new (false);
    for (uint64_t i = 0; i < 5; i++)
        push (keyed, "A", make_msg (i));
    for (uint64_t i = 0; i < 3; i++)
        push (keyed, "B", make_msg (10 + i));
    assert_int_equal (fh_keyed_max_key_backlog (keyed), 5);
    assert_int_equal (fh_keyed_key_backlog_high (keyed), 5);
    assert_int_equal (fh_keyed_queued (keyed), 8);
    assert_int_equal (fh_keyed_keys (keyed), 2);
    fh_keyed_slot_t *slot;
    fh_msg_t *msg = take (keyed, 0, &slot); /* A: 4 left */
    assert_int_equal (fh_keyed_max_key_backlog (keyed), 4);
    fh_keyed_retry (keyed, slot, 0); /* A: 5 again */
    assert_int_equal (fh_keyed_max_key_backlog (keyed), 5);
    assert_int_equal (fh_keyed_busy (keyed), 0);
    (void) msg;
    /* Drain A only: the max steps down to B's 3. */
    for (int i = 0; i < 5; i++) {
        msg = take (keyed, 0, &slot);
        if (msg->seq >= 10) { /* B's turn: put it back by retrying */
            fh_keyed_retry (keyed, slot, 0);
            msg = take (keyed, 0, &slot);
        }
        assert_true (msg->seq < 10);
        finish (keyed, slot, msg);
    }
    assert_int_equal (fh_keyed_max_key_backlog (keyed), 3);
    assert_int_equal (fh_keyed_key_backlog_high (keyed), 5);
    assert_int_equal (fh_keyed_keys (keyed), 1);
    /* A burst on one key grows the counts by length; it drains to 0. */
    for (uint64_t i = 0; i < 50000; i++)
        push (keyed, "C", make_msg (100 + i));
    assert_int_equal (fh_keyed_max_key_backlog (keyed), 50000);
    while ((msg = take (keyed, 0, &slot)))
        finish (keyed, slot, msg);
    assert_int_equal (fh_keyed_max_key_backlog (keyed), 0);
    assert_int_equal (fh_keyed_key_backlog_high (keyed), 50000);

    /* A retry after pushes refilled the busy key: its backlog goes one
       above anything pushed, at every length (the table of lengths grows
       by doubling, so the edges are at powers of two). */
    for (uint64_t n = 1; n <= 600; n++) {
        for (uint64_t i = 0; i < n; i++)
            push (keyed, "D", make_msg (i));
        fh_msg_t *first = take (keyed, 0, &slot);
        push (keyed, "D", make_msg (n));
        fh_keyed_retry (keyed, slot, 0);
        assert_int_equal (fh_keyed_max_key_backlog (keyed), n + 1);
        msg = take (keyed, 0, &slot);
        assert_ptr_equal (msg, first);
        uint64_t expected = 0;
        do {
            assert_int_equal (msg->seq, expected);
            expected++;
            finish (keyed, slot, msg);
        } while ((msg = take (keyed, 0, &slot)));
        assert_int_equal (expected, n + 1);
    }
    fh_keyed_destroy (&keyed, NULL, NULL);
}

static void
test_destroy_releases_what_is_queued (void **state)
{
    (void) state;
    fh_keyed_t *keyed = fh_keyed_new (false);
    fh_keyed_slot_t *s1, *s2;
    size_t released_count;
    fh_msg_t *m1, *m2;
    /* Destroy with messages queued, retried and taken. */
    for (uint64_t i = 0; i < 50; i++)
        push (keyed, i % 2 ? "odd" : "even", make_msg (i));
    m1 = take (keyed, 0, &s1);
    m2 = take (keyed, 0, &s2);
    fh_keyed_retry (keyed, s2, 1000);
    released_count = 0;
    fh_keyed_destroy (&keyed, count_release, &released_count);
    assert_null (keyed);
    assert_int_equal (released_count, 49);
    fh_msg_release (m1, NULL); /* the taker's own; m2 was retried, so queued */
    (void) m2;
}

/* Threads: 4 workers and a producer around one mutex, as the hub runs it. */

enum { T_WORKERS = 4, T_MSGS = 200000, T_KEYS = 1000 };

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    fh_keyed_t *keyed;
    bool producing;
    uint32_t key_of[T_MSGS];
    uint32_t kseq_of[T_MSGS];
    atomic_uint done[T_MSGS];
    atomic_uint running[T_KEYS]; /* messages of the key inside "consume" */
    atomic_uint next_kseq[T_KEYS];
    atomic_uint errors;
    atomic_uint retries;
} stress_t;

static void *
stress_worker (void *arg)
{
    stress_t *st = arg;
    static atomic_uint workers;
    uint64_t rng = atomic_fetch_add (&workers, 1);
    pthread_mutex_lock (&st->lock);
    while (true) {
        fh_keyed_slot_t *slot;
        fh_msg_t *msg = fh_keyed_take (st->keyed, 0, &slot, NULL);
        if (!msg) {
            if (!st->producing && fh_keyed_queued (st->keyed) == 0
                && fh_keyed_busy (st->keyed) == 0)
                break;
            pthread_cond_wait (&st->wake, &st->lock);
            continue;
        }
        pthread_mutex_unlock (&st->lock);

        /* "consume": alone for its key, and the key's next in order. */
        uint32_t key = st->key_of[msg->seq];
        if (atomic_fetch_add (&st->running[key], 1) != 0)
            atomic_fetch_add (&st->errors, 1);
        if (atomic_load (&st->next_kseq[key]) != st->kseq_of[msg->seq])
            atomic_fetch_add (&st->errors, 1);
        bool retry = rng_below (&rng, 100) == 0;
        if (!retry) {
            atomic_fetch_add (&st->next_kseq[key], 1);
            atomic_fetch_add (&st->done[msg->seq], 1);
        }
        atomic_fetch_sub (&st->running[key], 1);

        pthread_mutex_lock (&st->lock);
        if (retry) {
            atomic_fetch_add (&st->retries, 1);
            fh_keyed_retry (st->keyed, slot, 0);
        }
        else {
            fh_keyed_release (st->keyed, slot);
            fh_msg_release (msg, NULL);
        }
        /* Its key may be ready again, or everything done. */
        pthread_cond_broadcast (&st->wake);
    }
    pthread_cond_broadcast (&st->wake);
    pthread_mutex_unlock (&st->lock);
    return NULL;
}

static void
test_threads_keep_per_key_order (void **state)
{
    (void) state;
    stress_t *st = calloc (1, sizeof *st);
    assert_non_null (st);
    pthread_mutex_init (&st->lock, NULL);
    pthread_cond_init (&st->wake, NULL);
    st->keyed = fh_keyed_new (false);
    st->producing = true;
    uint64_t rng = 7;
    uint32_t next[T_KEYS] = {0};
    for (size_t i = 0; i < T_MSGS; i++) {
        uint32_t key = (uint32_t) rng_below (&rng, T_KEYS);
        st->key_of[i] = key;
        st->kseq_of[i] = next[key]++;
    }
    pthread_t threads[T_WORKERS];
    for (int w = 0; w < T_WORKERS; w++)
        assert_int_equal (pthread_create (&threads[w], NULL, stress_worker, st), 0);
    for (size_t i = 0; i < T_MSGS; i++) {
        uint32_t key = st->key_of[i];
        fh_msg_t *msg = make_msg (i);
        fh_msg_t *replaced;
        pthread_mutex_lock (&st->lock);
        int rc = fh_keyed_push (st->keyed, &key, sizeof key, msg, &replaced);
        pthread_cond_signal (&st->wake);
        pthread_mutex_unlock (&st->lock);
        assert_int_equal (rc, 0);
        assert_null (replaced);
    }
    pthread_mutex_lock (&st->lock);
    st->producing = false;
    pthread_cond_broadcast (&st->wake);
    pthread_mutex_unlock (&st->lock);
    for (int w = 0; w < T_WORKERS; w++)
        pthread_join (threads[w], NULL);

    assert_int_equal (atomic_load (&st->errors), 0);
    assert_true (atomic_load (&st->retries) > 0);
    for (size_t i = 0; i < T_MSGS; i++)
        assert_int_equal (atomic_load (&st->done[i]), 1);
    for (size_t k = 0; k < T_KEYS; k++)
        assert_int_equal (atomic_load (&st->next_kseq[k]), next[k]);
    assert_int_equal (fh_keyed_keys (st->keyed), 0);
    fh_keyed_destroy (&st->keyed, NULL, NULL);
    pthread_cond_destroy (&st->wake);
    pthread_mutex_destroy (&st->lock);
    free (st);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_order_in_execution_order),
        cmocka_unit_test (test_order_with_coalescing),
        cmocka_unit_test (test_no_cross_key_blocking),
        cmocka_unit_test (test_keys_take_turns),
        cmocka_unit_test (test_cold_keys_beside_a_hot_one),
        cmocka_unit_test (test_coalescing),
        cmocka_unit_test (test_retry_keeps_order_and_blocks_only_its_key),
        cmocka_unit_test (test_idle_keys_leave_nothing),
        cmocka_unit_test (test_backlog_figures),
        cmocka_unit_test (test_destroy_releases_what_is_queued),
        cmocka_unit_test (test_threads_keep_per_key_order),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
