/*  consumer_offer - the enqueuer's side of a consumer. See consumer.h;
    consumer_internal.h says how the files share the work.

    Everything here runs on the enqueuer's thread (fh:enq), once or twice
    a message: whether the consumer takes it at all (its shard), the offer
    to its queue or, spilling, to its spool writer, the overflow policy of
    a full queue, drop counting, the backlog's high-water mark and the
    warn_at warning, and the wake-up of the consumer. The bytes a consumer
    holds in memory (queue.max_bytes, memory.max_bytes) are added by the
    offer; consumer_hold.c keeps that count, and lets a message go.
*/
#include "consumer_internal.h"

#include "memory.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>

/* Spilled messages whose completion waits for their spooled copy, at most
   (beyond, a spilled message counts as handled when written; one with an
   emit waiter always waits). */
#define DEFERRED_MAX 262144

bool
fh_consumer_takes (const fh_consumer_t *self, const fh_msg_t *msg)
{
    return !self->shard || fh_shard_takes (self->shard, msg);
}

/* Pool mode: the queue and the scheduler together hold at most capacity
   messages not yet started. */
static bool
s_pool_full (fh_consumer_t *self)
{
    uint64_t started = atomic_load_explicit (&self->pool_started, memory_order_acquire);
    uint64_t enqueued = fh_count_read (&self->offered.enqueued);
    enqueued += fh_count_read (&self->tally.enqueued); /* inherited from a spool */
    uint64_t evicted = fh_count_read (&self->offered.evicted);
    /* Spilled messages lost before they were read back never start. */
    evicted += fh_count_read (&self->spill_tally.evicted);
    return enqueued - evicted - started >= fh_queue_capacity (self->queue);
}

/* drop-oldest: evicts from the queue's head until `bytes` more fit (the
   consumer may make room meanwhile; over bytes, several may have to go).
   In a pool, messages already with the scheduler stay: when the queue
   itself is empty there is no room. True when there is room now (bytes:
   as much as evicting could give). */
static bool
s_evict_for (fh_consumer_t *self, uint64_t bytes, fh_handled_t *handled)
{
    fh_msg_t *oldest = NULL;
    while ((fh_queue_full (self->queue) || (self->pool && s_pool_full (self))
            || fh_cons_over_bytes (self, bytes))
           && (oldest = fh_queue_evict (self->queue))) {
        fh_count_bump (&self->offered.evicted);
        fh_count_bump (&self->offered.dropped);
        fh_cons_let_go (self, oldest, FH_GONE_EVICTED, handled, 0);
    }
    return !fh_queue_full (self->queue) && !(self->pool && s_pool_full (self));
}

/* After a push: keeps backlog_max and the warn_at warning. Reads the
   consumer's index (a cache miss) only when the free upper bound says the
   answer might change something. */
static void
s_watch_backlog (fh_consumer_t *self)
{
    size_t warn_at = atomic_load_explicit (&self->warn_at, memory_order_relaxed);
    size_t bound = fh_queue_depth_bound (self->queue);
    uint64_t max = fh_count_read (&self->offered.backlog_max);
    bool warn_check = warn_at && (self->warn_armed ? bound >= warn_at : bound >= warn_at / 2);
    if (bound <= max && !warn_check) {
        if (warn_at && !self->warn_armed)
            self->warn_armed = true; /* bound < warn_at / 2: drained enough */
        return;
    }
    size_t depth = fh_queue_depth (self->queue);
    fh_count_raise (&self->offered.backlog_max, depth);
    if (!warn_at)
        return;
    if (self->warn_armed && depth >= warn_at) {
        self->warn_armed = false;
        fh_warning ("consumer '%s': backlog reached %zu (queue.warn_at %zu, capacity "
                    "%zu); warns again once it has drained below %zu",
                    self->name, depth, warn_at, fh_queue_capacity (self->queue), warn_at / 2);
    }
    else if (!self->warn_armed && depth < warn_at / 2)
        self->warn_armed = true;
}

/* The spiller, under spill_lock: msg goes to the spool; its completion
   (handled, its emit waiter) now waits for the copy read back. */
static void
s_defer (fh_consumer_t *self, fh_msg_t *msg)
{
    if (self->deferred_count == self->deferred_cap
        && (self->deferred_cap < DEFERRED_MAX || msg->emit)) {
        size_t cap = self->deferred_cap ? self->deferred_cap * 2 : 1024;
        struct s_deferred *ring = malloc (cap * sizeof *ring);
        if (ring) {
            fh_memory_populate (ring, cap * sizeof *ring); /* not a fault a page */
            for (size_t i = 0; i < self->deferred_count; i++)
                ring[i] = self->deferred[(self->deferred_head + i) % self->deferred_cap];
            free (self->deferred);
            self->deferred = ring;
            self->deferred_cap = cap;
            self->deferred_head = 0;
        }
    }
    if (self->deferred_count < self->deferred_cap && fh_msg_defer (msg) == 0) {
        self->deferred[(self->deferred_head + self->deferred_count) % self->deferred_cap]
            = (struct s_deferred){msg->seq, msg->deferral};
        self->deferred_count++;
    }
}

/* Under spill_lock, from the enqueuer: msg goes to the spool writer,
   which holds this consumer's share of it until it is written. Counted as
   enqueued now (the spill is accepted); its completion waits for the copy
   read back. FULL when the hand-off is full: the disk is behind the bus
   for longer than the hand-off covers, and the enqueuer waits, as for
   `block` (nothing is dropped for a slow disk). */
static fh_offer_t
s_spill_offer (fh_consumer_t *self, fh_msg_t *msg)
{
    uint64_t bytes = fh_cons_msg_bytes (msg);
    if (!fh_spool_writer_room (self->spool_writer, bytes))
        return FH_OFFER_FULL;
    /* All before the hand-off: from then on the writer may finish with
       msg, and a reader read it back, at any moment. */
    fh_count_bump (&self->offered.enqueued);
    fh_cons_tell (self, msg->emit, FH_OUTCOME_PENDING);
    s_defer (self, msg);
    int rc = fh_spool_writer_put (self->spool_writer, msg, msg->frame_count, bytes, false);
    assert (rc == 0); /* the only putter, and the writer only makes room */
    (void) rc;
    return FH_OFFER_TAKEN;
}

#define PREDECESSORS_MAX 16 /* reloads a line of waiting instances is followed through */

/* A reload's successor that takes its predecessor's spool over, before
   that spool is open: msg goes onto the end of the spool it will get
   (its predecessor's, or, when that one never started either, the
   nearest started one's up the line), which it reads first, so order
   holds and the bus does not wait while the old instance finishes what
   it holds (minutes, for a slow consumer with a backlog). FULL only
   around a hand-over itself, when the spool's hand-off is full, or when
   no instance up the line has its spool open. Each predecessor pointer
   is read under its owner's spill_lock, taken newest to oldest. */
static fh_offer_t
s_offer_via_predecessor (fh_consumer_t *self, fh_msg_t *msg)
{
    fh_offer_t offer = FH_OFFER_FULL;
    fh_consumer_t *held[PREDECESSORS_MAX + 1];
    size_t count = 0;
    pthread_mutex_lock (&self->spill_lock);
    held[count++] = self;
    for (fh_consumer_t *before = self->predecessor; before && count <= PREDECESSORS_MAX;
         before = before->predecessor) {
        pthread_mutex_lock (&before->spill_lock);
        held[count++] = before;
        if (!atomic_load_explicit (&before->state_open, memory_order_acquire)
            || !before->spool_writer)
            continue; /* never started: its own predecessor's spool is the one */
        offer = s_spill_offer (before, msg);
        /* Its memory queue is older: it consumes that before it leaves,
           instead of spooling it behind these. */
        if (offer == FH_OFFER_TAKEN)
            atomic_store (&before->spooling, true);
        break;
    }
    while (count)
        pthread_mutex_unlock (&held[--count]->spill_lock);
    return offer;
}

fh_offer_t
fh_consumer_offer (fh_consumer_t *self, fh_msg_t *msg, fh_handled_t *handled)
{
    /* The spool is opened by the main thread while this instance may
       already take offers (a reload's successor): read it once opened. */
    bool has_spool = atomic_load_explicit (&self->state_open, memory_order_acquire);
    if (!has_spool
        && (self->wants_write_ahead
            || atomic_load_explicit (&self->inherits_spool, memory_order_relaxed)))
        /* A reload's successor before its spool is open: with write-ahead
           nothing reaches it but through its spool, and one that takes
           over its predecessor's spool takes nothing before the spool
           (order): through the predecessor's spool, then. */
        return s_offer_via_predecessor (self, msg);
    /* Spooling: everything new goes behind what is on disk. */
    if (has_spool && atomic_load_explicit (&self->spooling, memory_order_acquire)) {
        pthread_mutex_lock (&self->spill_lock);
        if (atomic_load (&self->spooling)) {
            fh_offer_t offer = s_spill_offer (self, msg);
            pthread_mutex_unlock (&self->spill_lock);
            return offer;
        }
        pthread_mutex_unlock (&self->spill_lock);
    }
    uint64_t bytes = fh_cons_msg_bytes (msg);
    if (fh_queue_full (self->queue) || (self->pool && s_pool_full (self))
        || fh_cons_over_bytes (self, bytes)) {
        switch (self->overflow) {
        case FH_OVERFLOW_BLOCK: return FH_OFFER_FULL;
        case FH_OVERFLOW_SPILL:
            if (!has_spool)
                /* A reload's successor before it starts: its spool is still
                   its predecessor's. Spill loses nothing: wait, as block
                   does, until it starts (the enqueuer still hears the
                   control plane meanwhile). */
                return FH_OFFER_FULL;
            pthread_mutex_lock (&self->spill_lock);
            fh_offer_t offer = s_spill_offer (self, msg);
            /* From the first spilled message on, the rest follow it. */
            if (offer == FH_OFFER_TAKEN)
                atomic_store (&self->spooling, true);
            pthread_mutex_unlock (&self->spill_lock);
            return offer;
        case FH_OVERFLOW_DROP_OLDEST:
            if (s_evict_for (self, bytes, handled))
                break; /* room now */
            /* fall through */
        default:
            fh_count_bump (&self->offered.dropped);
            fh_cons_tell (self, msg->emit, FH_OUTCOME_DROPPED);
            return FH_OFFER_REFUSED;
        }
    }
    fh_cons_tell (self, msg->emit, FH_OUTCOME_PENDING);
    /* Counted before it is visible to the consumer, so no reader sees it
       dequeued but not yet enqueued. With one producer, a queue that had
       room still has it. */
    fh_count_bump (&self->offered.enqueued);
    fh_cons_held_more (self, bytes);
    bool pushed = fh_queue_push (self->queue, msg);
    assert (pushed);
    (void) pushed;
    s_watch_backlog (self);
    return FH_OFFER_TAKEN;
}

/* Runs on the enqueuer at a reload's switch (see consumer.h). */
bool
fh_consumer_fold_into (fh_consumer_t *from, fh_consumer_t *into, fh_handled_t *handled)
{
    /* One that inherits a spool passes it on at its own start: folding it
       away, even empty, would leave its successor without it. */
    if (atomic_load (&from->inherits_spool))
        return false;
    size_t count = fh_queue_size (from->queue);
    uint64_t bytes = atomic_load_explicit (&from->held_bytes, memory_order_relaxed);
    if (count == 0)
        return true;
    if (atomic_load (&from->state_open) || count > fh_queue_capacity (into->queue)
        || (into->max_bytes && bytes > into->max_bytes) || into->wants_write_ahead
        || atomic_load (&into->inherits_spool))
        return false;
    /* Nobody pops from's queue (never started): this thread may. */
    for (fh_msg_t *msg; (msg = fh_queue_pop (from->queue));) {
        uint64_t size = fh_cons_msg_bytes (msg);
        fh_cons_held_less (from, size);
        fh_count_bump (&into->offered.enqueued);
        fh_cons_held_more (into, size);
        if (fh_queue_push (into->queue, msg))
            continue;
        /* Room was checked, but the ring may fail to grow (counted in
           alloc_failures): dropped and counted, as drop-oldest would. */
        fh_count_bump (&into->offered.evicted);
        fh_count_bump (&into->offered.dropped);
        fh_cons_let_go (into, msg, FH_GONE_EVICTED, handled, 0);
    }
    s_watch_backlog (into);
    return true;
}

void
fh_consumer_signal (fh_consumer_t *self)
{
    fh_queue_signal (self->queue);
}

void
fh_consumer_count_drop (fh_consumer_t *self, fh_msg_t *msg)
{
    fh_count_bump (&self->offered.dropped);
    if (msg)
        fh_cons_tell (self, msg->emit, FH_OUTCOME_DROPPED);
}

void
fh_consumer_set_warn_at (fh_consumer_t *self, size_t warn_at)
{
    atomic_store_explicit (&self->warn_at, warn_at, memory_order_relaxed);
}
