/*  consumer_pool - pool mode: the dispatcher and the pool workers.
    See consumer_internal.h.

    With workers > 1, or coalescing, a dispatcher thread moves messages
    from the queue (and the spool) into the per-key scheduler; the
    workers take them from there, one message of a key at a time.

    Without order_by (every message its own key, any order) the scheduler
    holds only a window of WINDOW_PER_WORKER messages a worker: the rest
    of the backlog stays in the queue, and the scheduler's table stays
    small. A worker whose attempts are quick takes a few messages per lock
    of pool_lock (its batch), and completions are taken a batch per lock.
*/
#include "consumer_internal.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pool mode: messages given to the scheduler and not yet started. The
   dispatcher moves messages (from the queue, and from a spool) only while
   this is below pool_limit, so queue.capacity bounds what the pool holds
   in memory. */
/* How often a paused pool worker looks whether it was resumed. */
#define PAUSE_POLL_NS INT64_C (100000000)

static uint64_t
s_pool_held (fh_consumer_t *self)
{
    uint64_t handed = atomic_load_explicit (&self->pool_handed, memory_order_relaxed);
    uint64_t started = atomic_load_explicit (&self->pool_started, memory_order_acquire);
    return handed > started ? handed - started : 0;
}

/* Messages the dispatcher moves per lock of pool_lock. */
enum { BATCH = 64 };
/* Without order_by: what the scheduler holds a worker (at least BATCH). */
enum { WINDOW_PER_WORKER = 16 };
/* Without order_by: the most a worker takes per lock, and how quick its
   attempts must be (a message, on average) for it to take more than one:
   a slow plugin's messages are never held back behind each other. */
enum { WORKER_BATCH_MAX = 8 };
#define QUICK_ATTEMPT_NS INT64_C (20000)
/* Completions taken per lock of pool_lock. */
enum { COMPLETIONS = 16 };

uint64_t
fh_cons_pool_limit (const fh_consumer_t *self)
{
    uint64_t capacity = fh_queue_capacity (self->queue);
    if (self->order_key)
        return capacity; /* keys take turns over the whole backlog */
    uint64_t window = (uint64_t) WINDOW_PER_WORKER * self->worker_count;
    if (window < BATCH)
        window = BATCH;
    return window < capacity ? window : capacity;
}

/* pool_lock held, by a worker that just started some: wakes the
   dispatcher waiting for room once the scheduler is half empty (with
   order_by, once it has any room) and no longer over its bytes. */
static void
s_room_made (fh_consumer_t *self)
{
    if (!self->dispatcher_room)
        return;
    uint64_t low = self->order_key ? self->pool_limit - 1 : self->pool_limit / 2;
    if (s_pool_held (self) <= low && !fh_cons_over_bytes (self, 0)) {
        self->dispatcher_room = false;
        pthread_cond_signal (&self->pool_room);
    }
}

/* The dispatcher's step for a batch: its keys, then each message given to
   the scheduler and a worker woken, or, when it replaces an older one
   (coalescing), the older one done. */
static void
s_hand_to_scheduler (fh_consumer_t *self, fh_msg_t **batch, size_t count)
{
    char keys[BATCH][FH_ORDER_KEY_MAX];
    size_t key_sizes[BATCH];
    /* Keys outside the lock: extraction may parse JSON. */
    for (size_t i = 0; i < count; i++) {
        key_sizes[i] = FH_ORDER_KEY_MAX;
        if (!self->order_key) {
            memcpy (keys[i], &batch[i]->seq, sizeof batch[i]->seq);
            key_sizes[i] = sizeof batch[i]->seq;
        }
        else if (!fh_order_key_extract (self->order_key, batch[i], keys[i], &key_sizes[i]))
            fh_count_bump (&self->pool_tally.key_fallback);
    }
    pthread_mutex_lock (&self->pool_lock);
    for (size_t i = 0; i < count; i++) {
        fh_msg_t *replaced = NULL;
        /* Held until a worker starts it; one from the queue already was. */
        if (batch[i]->from_spool)
            fh_cons_held_more (self, fh_cons_msg_bytes (batch[i]));
        fh_bump (&self->pool_handed);
        if (fh_keyed_push (self->keyed, keys[i], key_sizes[i], batch[i], &replaced) != 0) {
            /* Out of memory: lost for this consumer, and counted. */
            fh_error ("consumer '%s': out of memory: dropped message %llu", self->name,
                      (unsigned long long) batch[i]->seq);
            replaced = batch[i];
        }
        else
            pthread_cond_signal (&self->pool_work);
        if (replaced) {
            fh_count_bump (&self->pool_tally.coalesced);
            atomic_store_explicit (&self->pool_started, atomic_load (&self->pool_started) + 1,
                                   memory_order_release);
            /* Replaced by a newer one: done with it. */
            fh_cons_let_go (self, replaced, FH_GONE_COALESCED, &self->dispatcher_handled, 0);
        }
    }
    pthread_mutex_unlock (&self->pool_lock);
}

/* due_ns (CLOCK_MONOTONIC) as a condition variable's deadline. */
static struct timespec
s_until (int64_t due_ns)
{
    return (struct timespec){(time_t) (due_ns / 1000000000), (long) (due_ns % 1000000000)};
}

/* pool_lock held: waits on pool_work until due_ns (CLOCK_MONOTONIC;
   INT64_MAX: until woken). Counted in pool_sleepers before a last look
   at the completions: a completion either sees the sleeper (and wakes it
   under pool_lock, fh_cons_pool_completed) or is seen here. */
static void
s_pool_wait_until (fh_consumer_t *self, int64_t due_ns)
{
    atomic_fetch_add (&self->pool_sleepers, 1);
    if (fh_pending_done_count (self->pending) == 0) {
        if (due_ns == INT64_MAX)
            pthread_cond_wait (&self->pool_work, &self->pool_lock);
        else {
            struct timespec until = s_until (due_ns);
            pthread_cond_timedwait (&self->pool_work, &self->pool_lock, &until);
        }
    }
    atomic_fetch_sub (&self->pool_sleepers, 1);
}

/* A full scheduler (pool_limit, or its bytes) with more to read: wait for
   the workers to start some (the queue's wait would not sleep), or for
   `abort`, at most PENDING_POLL_NS. */
static void
s_wait_for_room (fh_consumer_t *self)
{
    pthread_mutex_lock (&self->pool_lock);
    if ((s_pool_held (self) >= self->pool_limit || fh_cons_over_bytes (self, 0))
        && !atomic_load (&self->abort)) {
        self->dispatcher_room = true;
        struct timespec until = s_until (fh_clock_mono_ns () + PENDING_POLL_NS);
        pthread_cond_timedwait (&self->pool_room, &self->pool_lock, &until);
        self->dispatcher_room = false;
    }
    pthread_mutex_unlock (&self->pool_lock);
}

/* Retiring with a full spool window: waits a little for it to move; true
   when the dispatcher is to end (abort, or tickets were abandoned). */
static bool
s_wait_for_window (fh_consumer_t *self)
{
    uint64_t abandoned = fh_count_read (&self->tally.tickets_abandoned);
    pthread_mutex_lock (&self->pool_lock);
    self->dispatcher_window = true;
    pthread_cond_broadcast (&self->pool_work); /* the ticket deadline runs */
    s_pool_wait_until (self, fh_clock_mono_ns () + PENDING_POLL_NS);
    self->dispatcher_window = false;
    pthread_mutex_unlock (&self->pool_lock);
    return atomic_load (&self->abort)
           || fh_count_read (&self->tally.tickets_abandoned) != abandoned;
}

/* Pool mode: moves messages from the queue (and the spool) into the
   per-key scheduler, a batch per lock, and wakes a worker for each. */
void *
fh_cons_dispatcher_thread (void *arg)
{
    fh_consumer_t *self = arg;
    fh_msg_t *batch[BATCH];
    const uint64_t limit = self->pool_limit;
    while (true) {
        /* Workers kick the queue as they start messages while a spool
           is read: room for more of it. */
        unsigned kicks = fh_queue_kicks (self->queue);
        if (fh_cons_pause_wait (self))
            continue; /* paused: the workers finish what they were given */
        bool closed = fh_queue_closed (self->queue);
        bool retiring = atomic_load (&self->retiring);
        if (self->spill_at_shutdown && closed)
            fh_cons_spill_queue_at_shutdown (self); /* at a stop, or for a successor */
        size_t count = 0;
        uint64_t held = s_pool_held (self);
        while (count < BATCH && held + count < limit && (batch[count] = fh_queue_pop (self->queue)))
            count++;
        /* The spool after the memory queue, not at shutdown (but when a
           reload replaces this consumer). A record read stays in the spool
           until its message is done (fh_cons_done). */
        bool readable = (!closed || (retiring && !self->spill_at_shutdown)) && self->spool
                        && !fh_cons_spool_window_full (self);
        while (count < BATCH && readable && held + count < limit && !fh_cons_over_bytes (self, 0)
               && (batch[count] = fh_cons_spool_next (self)))
            count++;
        if (count == 0) {
            bool spool_left = readable && fh_spool_records (self->spool);
            if (held >= limit && fh_queue_size (self->queue) > 0) {
                /* The window is full, the rest waits in the queue. */
                s_wait_for_room (self);
                if (atomic_load (&self->abort))
                    break;
                continue;
            }
            if (spool_left && s_pool_held (self) < limit && !fh_cons_over_bytes (self, 0))
                continue;
            if (!spool_left && readable && closed && fh_cons_spool_unread (self)) {
                /* Retiring: the writer still has some to write first. */
                fh_spool_writer_flush (self->spool_writer);
                continue;
            }
            if (closed && retiring && !self->spill_at_shutdown && self->spool
                && fh_spool_records (self->spool) && fh_cons_spool_window_full (self)) {
                /* Its window is full of records not done: the workers
                   wait for their tickets at most the grace; once they
                   abandon any, the rest of the spool is the successor's. */
                if (s_wait_for_window (self))
                    break;
                continue;
            }
            if (spool_left && closed) {
                /* Retiring with a full scheduler: wait for a worker to
                   start one (the queue's wait would not sleep). */
                s_wait_for_room (self);
                if (atomic_load (&self->abort))
                    break;
                continue;
            }
            if (!fh_queue_wait_since (self->queue, kicks))
                break; /* closed and drained */
            continue;
        }
        s_hand_to_scheduler (self, batch, count);
    }
    pthread_mutex_lock (&self->pool_lock);
    self->dispatcher_done = true;
    pthread_cond_broadcast (&self->pool_work);
    pthread_mutex_unlock (&self->pool_lock);
    atomic_fetch_add (&self->done_workers, 1);
    return NULL;
}

/* Pool mode, pool_lock held: tells the scheduler an attempt's verdict: a
   message done leaves its key, one due again waits in it (the worker
   does not), a parked one keeps its key busy until it completes. */
static void
s_pool_after (fh_consumer_t *self, const fh_attempt_t *at, fh_verdict_t verdict)
{
    if (verdict == FH_ATTEMPT_PARKED)
        return;
    if (verdict == FH_ATTEMPT_AGAIN)
        fh_keyed_retry (self->keyed, at->slot, at->due_ns);
    else
        fh_keyed_release (self->keyed, at->slot);
    /* The earliest due may have changed; the key may have more. */
    pthread_cond_signal (&self->pool_work);
}

/* Pool mode: finishes the messages whose PENDING answers completed, up
   to COMPLETIONS of them, that another worker has not taken, and tells
   the scheduler their verdicts under one lock (pool_lock held on entry
   and on return, not in between). */
static void
s_pool_take_completed (s_worker_t *worker)
{
    fh_consumer_t *self = worker->consumer;
    pthread_mutex_unlock (&self->pool_lock);
    fh_attempt_t at[COMPLETIONS];
    fh_verdict_t verdict[COMPLETIONS];
    size_t took = 0;
    while (took < COMPLETIONS && fh_cons_completion (worker, &at[took], &verdict[took]))
        took++;
    pthread_mutex_lock (&self->pool_lock);
    for (size_t i = 0; i < took; i++)
        s_pool_after (self, &at[i], verdict[i]);
    if (took)
        self->pool_worked = true;
}

/* pool_lock held: takes up to `max` messages from the scheduler (at
   least one, else 0), with their slots and retries so far, each counted
   as started the first time, a pending claim made for each; stops early
   when the pending table fills. */
static size_t
s_pool_take (fh_consumer_t *self, int64_t now, size_t max, fh_msg_t **msgs, fh_keyed_slot_t **slots,
             unsigned *retries, int64_t *next_due)
{
    size_t count = 0;
    while (count < max && (count == 0 || !fh_pending_full (self->pending))) {
        fh_msg_t *msg = fh_keyed_take (self->keyed, now, &slots[count], next_due);
        if (!msg)
            break;
        retries[count] = fh_keyed_slot_retries (slots[count]);
        if (retries[count] == 0) {
            fh_cons_held_less (self, fh_cons_msg_bytes (msg));
            atomic_store_explicit (&self->pool_started, atomic_load (&self->pool_started) + 1,
                                   memory_order_release);
            if (self->spool)
                fh_queue_kick (self->queue); /* room: the dispatcher may read on */
        }
        fh_pending_claim (self->pending); /* the attempt takes it over or gives it back */
        msgs[count++] = msg;
    }
    if (count) {
        self->pool_worked = true;
        s_room_made (self);
    }
    return count;
}

/* How many a worker takes this time: one with order_by (a key's message
   waiting in one worker's hand would hold no other key back, but it
   could wait behind that worker's others), else its batch, at most its
   share of what is queued. */
static size_t
s_pool_share (s_worker_t *worker)
{
    fh_consumer_t *self = worker->consumer;
    if (self->order_key || worker->batch <= 1)
        return 1;
    size_t share = (fh_keyed_queued (self->keyed) + self->worker_count - 1) / self->worker_count;
    if (share > worker->batch)
        share = worker->batch;
    return share ? share : 1;
}

/* Pool mode, pool_lock held: once the dispatcher is done and nothing is
   queued, open tickets are waited for until the ticket deadline (which
   lowers *due), then abandoned: true then. */
static bool
s_pool_last_tickets (fh_consumer_t *self, int64_t *due)
{
    if (!(self->dispatcher_done || self->dispatcher_window) || fh_keyed_queued (self->keyed)
        || !fh_pending_count (self->pending)) {
        self->pool_drained_ns = 0;
        return false;
    }
    if (!self->pool_drained_ns)
        self->pool_drained_ns = fh_clock_mono_ns ();
    int64_t deadline = fh_cons_ticket_deadline (self, self->pool_drained_ns);
    if (fh_clock_mono_ns () >= deadline) {
        fh_cons_abandon_tickets (self);
        return true;
    }
    if (deadline < *due)
        *due = deadline;
    return false;
}

/* Pool mode: takes the next message from the scheduler (round robin over
   keys, one message of a key at a time), attempts it once
   (fh_cons_attempt), and tells the scheduler the verdict: done, or retry
   later. A message the plugin answered PENDING keeps its key busy until
   it completes; any worker then finishes it. */
void *
fh_cons_pool_worker_thread (void *arg)
{
    s_worker_t *worker = arg;
    fh_consumer_t *self = worker->consumer;
    pthread_mutex_lock (&self->pool_lock);
    while (true) {
        if (fh_pending_done_count (self->pending)) {
            s_pool_take_completed (worker);
            continue;
        }
        int64_t now = self->clock.now_ns (self->clock.arg);
        int64_t next_due = INT64_MAX;
        /* Every claim is made under pool_lock: a table that is not full
           now has room for this one's ticket, should the plugin take one. */
        bool full = fh_pending_full (self->pending);
        /* Paused (fanhub pause): what the scheduler holds waits too. */
        bool paused = atomic_load (&self->paused) && !fh_queue_closed (self->queue)
                      && !atomic_load (&self->retiring);
        fh_msg_t *msgs[WORKER_BATCH_MAX];
        fh_keyed_slot_t *slots[WORKER_BATCH_MAX];
        unsigned retries[WORKER_BATCH_MAX];
        size_t count = full || paused ? 0
                                      : s_pool_take (self, now, s_pool_share (worker), msgs, slots,
                                                     retries, &next_due);
        if (!count) {
            bool drained = fh_keyed_queued (self->keyed) == 0 && fh_keyed_busy (self->keyed) == 0;
            if ((drained || full) && self->pool_worked && self->desc->idle) {
                self->pool_worked = false;
                pthread_mutex_unlock (&self->pool_lock);
                fh_cons_idle (self);
                pthread_mutex_lock (&self->pool_lock);
                continue;
            }
            if (drained && self->dispatcher_done)
                break;
            if (atomic_load (&self->abort))
                break;
            if (s_pool_last_tickets (self, &next_due))
                continue;
            if (paused && next_due - now > PAUSE_POLL_NS) /* a resume is seen soon */
                next_due = now + PAUSE_POLL_NS;
            s_pool_wait_until (self, next_due);
            continue;
        }
        pthread_mutex_unlock (&self->pool_lock);

        fh_attempt_t at[WORKER_BATCH_MAX];
        fh_verdict_t verdict[WORKER_BATCH_MAX];
        int64_t start = now;
        for (size_t i = 0; i < count; i++) {
            if (retries[i] == 0)
                fh_cons_dequeued (worker, msgs[i], start);
            /* The slot keeps only the retries: each attempt is its own first. */
            at[i] = (fh_attempt_t){
                .msg = msgs[i], .slot = slots[i], .attempts = retries[i], .first_ns = start};
            verdict[i] = fh_cons_attempt (worker, &at[i], start);
            start = at[i].end_ns;
        }
        /* Quick attempts: take more at once next time; a slow one: one. */
        if (self->order_key || start - now > (int64_t) count * QUICK_ATTEMPT_NS)
            worker->batch = 1;
        else if (worker->batch < WORKER_BATCH_MAX)
            worker->batch = worker->batch ? 2 * worker->batch : 2;
        pthread_mutex_lock (&self->pool_lock);
        for (size_t i = 0; i < count; i++)
            s_pool_after (self, &at[i], verdict[i]);
    }
    pthread_cond_broadcast (&self->pool_work); /* let the others see the end */
    pthread_mutex_unlock (&self->pool_lock);
    atomic_fetch_add (&self->done_workers, 1);
    return NULL;
}
