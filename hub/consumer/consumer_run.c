/*  consumer_run - the single worker's loop (thread fh:c:NAME).
    See consumer_internal.h.

    Messages in arrival order, the memory queue first, then the spool; each
    is attempted (fh_cons_attempt, consumer_attempt.c) until it is done or
    parked on a ticket, a verdict of again waiting out its backoff here,
    so the next message waits behind it. Completions of PENDING answers
    are taken between messages; at the end, open tickets are waited for
    at most the grace, then abandoned.
*/
#include "consumer_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* A message due again (at->due_ns): true once its backoff is waited out
   here (it stays at the head of the queue: order holds); false when the
   hub stops first, and it is done. */
static bool
s_backoff (s_worker_t *worker, fh_attempt_t *at)
{
    fh_consumer_t *self = worker->consumer;
    if (self->clock.sleep_until (self->clock.arg, at->due_ns, &self->abort))
        return true;
    fh_cons_stopped (worker, at);
    return false;
}

/* Attempts at->msg from attempt number at->attempts + 1 on, the first at
   `start`, until it is done or parked on a ticket. Returns the clock at
   the end. Not inlined: the perf guard counts from here
   (tests/perf/perf_guard.py). */
__attribute__ ((noinline)) static int64_t
s_attempt (s_worker_t *worker, fh_attempt_t *at, int64_t start)
{
    fh_consumer_t *self = worker->consumer;
    fh_verdict_t verdict = fh_cons_attempt (worker, at, start);
    while (verdict == FH_ATTEMPT_AGAIN && s_backoff (worker, at))
        verdict = fh_cons_attempt (worker, at, self->clock.now_ns (self->clock.arg));
    return at->end_ns;
}

/* Consumes one message from the queue or the spool (see s_attempt). */
static int64_t
s_consume_one (s_worker_t *worker, fh_msg_t *msg, int64_t start)
{
    fh_cons_dequeued (worker, msg, start);
    fh_attempt_t at = {.msg = msg, .first_ns = start};
    return s_attempt (worker, &at, start);
}

/* One worker: finishes the messages whose plugin completed them late, in
   the order the completions came. Returns the clock at the end. Not
   inlined: the perf guard's worker case counts from here. */
__attribute__ ((noinline)) static int64_t
s_take_completions (s_worker_t *worker, int64_t now)
{
    fh_consumer_t *self = worker->consumer;
    fh_attempt_t at;
    fh_verdict_t verdict;
    while (fh_cons_completion (worker, &at, &verdict)) {
        now = at.end_ns;
        if (verdict == FH_ATTEMPT_AGAIN && s_backoff (worker, &at))
            now = s_attempt (worker, &at, self->clock.now_ns (self->clock.arg));
    }
    return now;
}

/* Waits for late completions while max_pending messages are open. False
   once the hub gives up waiting (abort). */
static bool
s_wait_pending (fh_consumer_t *self)
{
    while (!atomic_load (&self->abort)) {
        if (fh_pending_wait (self->pending, fh_clock_mono_ns () + PENDING_POLL_NS))
            return true;
    }
    return false;
}

/* Closed and drained, tickets still open: waits for completions until
   the ticket deadline, then abandons what is open. False when nothing is
   left to take or the hub gives up (abort). */
static bool
s_wait_last_tickets (fh_consumer_t *self, int64_t *drained_ns)
{
    if (!*drained_ns)
        *drained_ns = fh_clock_mono_ns ();
    while (!atomic_load (&self->abort)) {
        int64_t now = fh_clock_mono_ns ();
        int64_t deadline = fh_cons_ticket_deadline (self, *drained_ns);
        if (now >= deadline) {
            fh_cons_abandon_tickets (self);
            return fh_pending_done_count (self->pending) > 0;
        }
        if (fh_pending_wait (self->pending,
                             deadline - now < PENDING_POLL_NS ? deadline : now + PENDING_POLL_NS))
            return true;
    }
    return false;
}

bool
fh_cons_pause_wait (fh_consumer_t *self)
{
    if (!atomic_load (&self->paused))
        return false;
    bool paused = false;
    pthread_mutex_lock (&self->pause_lock);
    if (atomic_load (&self->paused) && !fh_queue_closed (self->queue)
        && !atomic_load (&self->retiring) && !atomic_load (&self->abort)) {
        /* Closing does not signal pause_cond: looked at again in 100 ms. */
        struct timespec until;
        clock_gettime (CLOCK_MONOTONIC, &until);
        until.tv_nsec += 100000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait (&self->pause_cond, &self->pause_lock, &until);
        paused = atomic_load (&self->paused);
    }
    pthread_mutex_unlock (&self->pause_lock);
    return paused;
}

/* One worker, one queue: messages in arrival order, one at a time (a
   plugin that answers PENDING may have up to max_pending open). */
void *
fh_cons_worker_thread (void *arg)
{
    s_worker_t *worker = arg;
    fh_consumer_t *self = worker->consumer;
    bool worked = false;    /* since the last idle call */
    int64_t drained_ns = 0; /* when only open tickets were left */
    /* One clock reading per message: the end of one consume is the start
       of the next when the queue was not empty in between. */
    int64_t now = self->clock.now_ns (self->clock.arg);
    while (true) {
        unsigned kicks = fh_queue_kicks (self->queue);
        if (fh_pending_done_count (self->pending)) {
            now = s_take_completions (worker, now);
            worked = true;
            drained_ns = 0; /* progress: the ticket wait starts again */
        }
        if (fh_pending_full (self->pending)) {
            /* max_pending open: no consume until one completes. idle lets
               a plugin that batches flush. */
            if (worked && self->desc->idle)
                fh_cons_idle (self);
            worked = false;
            if (!fh_pending_done_count (self->pending) && !s_wait_pending (self))
                break;
            continue;
        }
        if (fh_cons_pause_wait (self)) {
            now = self->clock.now_ns (self->clock.arg);
            continue; /* paused: completions still come */
        }
        bool closed = fh_queue_closed (self->queue);
        bool retiring = atomic_load (&self->retiring);
        /* A spilling one leaves its spool at a stop (for the next run)
           and when a reload retires it (for its successor). */
        bool reads_spool = !closed || (retiring && !self->spill_at_shutdown);
        if (self->spill_at_shutdown && closed)
            fh_cons_spill_queue_at_shutdown (self);
        fh_msg_t *msg = fh_queue_pop (self->queue);
        if (msg)
            fh_cons_held_less (self, fh_cons_msg_bytes (msg));
        /* The memory queue first: while spooling it holds the older ones.
           When a reload retires one that does not spill, it consumes its
           spool too. */
        if (!msg && reads_spool)
            msg = fh_cons_spool_next (self);
        if (!msg) {
            if (worked && self->desc->idle)
                fh_cons_idle (self);
            worked = false;
            /* With the window full of records not done, only tickets
               can move it: waited for below, at most the grace. */
            if (retiring && reads_spool && self->spool && fh_cons_spool_unread (self)
                && !fh_cons_spool_window_full (self)) {
                /* The spool still holds some: consume them, once the
                   writer has written what it still has. */
                if (!fh_spool_records (self->spool))
                    fh_spool_writer_flush (self->spool_writer);
                continue;
            }
            if (!fh_queue_wait_since (self->queue, kicks)) {
                /* Closed and drained: what the plugin still holds is
                   waited for, at most the ticket grace. */
                if (fh_pending_count (self->pending) == 0
                    || (!fh_pending_done_count (self->pending)
                        && !s_wait_last_tickets (self, &drained_ns)))
                    break;
            }
            now = self->clock.now_ns (self->clock.arg);
            continue;
        }
        now = s_consume_one (worker, msg, now);
        worked = true;
    }
    if (worked && self->desc->idle)
        fh_cons_idle (self);
    atomic_fetch_add (&self->done_workers, 1);
    return NULL;
}
