/*  consumer_hold - what a consumer holds, and the one way it lets go.
    See consumer_internal.h.

    The bytes a consumer holds in memory (queue.max_bytes, and
    memory.max_bytes for every consumer of the process): added by the
    enqueuer's offer (and a pool's dispatcher for a message read back from
    the spool), taken off by whichever thread takes a message out of
    memory: its worker starting it, the enqueuer evicting it, the
    dispatcher replacing it, the let-go.

    A message this consumer holds leaves it through fh_cons_let_go, on
    whichever thread lets go of it: done (completed or failed), abandoned,
    coalesced, evicted, the spool writer's share written, kept or lost,
    left at teardown. The way it leaves (s_ways) says what that costs:
    the outcome its emit waiter reads, whether the spool's cursor may pass
    its record, whether it was still counted in the bytes held. A spilled
    message's copy that is never read back in this run (never written,
    handed over with the spool, lost in it, left at teardown) is let go the same way
    through its deferred completion (fh_cons_let_go_copy). Outcomes
    without a release, a message taken (PENDING) or refused (DROPPED) at
    the offer, whose share the enqueuer keeps or releases itself, are
    told by fh_cons_tell, which the let-go uses too.
*/
#include "consumer_internal.h"

/* Payload bytes held in memory by every consumer's queue (and a pool's
   scheduler, until started): memory.max_bytes caps it. */
static atomic_uint_fast64_t s_memory_held;
static atomic_uint_fast64_t s_memory_max;

void
fh_consumer_set_memory_max (uint64_t max_bytes)
{
    atomic_store (&s_memory_max, max_bytes);
}

void
fh_cons_held_more (fh_consumer_t *self, uint64_t bytes)
{
    atomic_fetch_add_explicit (&self->held_bytes, bytes, memory_order_relaxed);
    atomic_fetch_add_explicit (&s_memory_held, bytes, memory_order_relaxed);
}

void
fh_cons_held_less (fh_consumer_t *self, uint64_t bytes)
{
    atomic_fetch_sub_explicit (&self->held_bytes, bytes, memory_order_relaxed);
    atomic_fetch_sub_explicit (&s_memory_held, bytes, memory_order_relaxed);
}

/* True when taking `bytes` more would pass queue.max_bytes or
   memory.max_bytes. A consumer holding nothing takes one message of any
   size: nothing it could wait for would make room. */
bool
fh_cons_over_bytes (fh_consumer_t *self, uint64_t bytes)
{
    uint64_t held = atomic_load_explicit (&self->held_bytes, memory_order_relaxed);
    if (held == 0)
        return false;
    if (self->max_bytes && held + bytes > self->max_bytes)
        return true;
    uint64_t max = atomic_load_explicit (&s_memory_max, memory_order_relaxed);
    return max && atomic_load_explicit (&s_memory_held, memory_order_relaxed) + bytes > max;
}

/* What each way of leaving costs. */
static const struct {
    fh_outcome_t outcome; /* told to the emit waiter; NONE: nothing to tell */
    bool held;            /* still counted in the bytes held */
    bool record_done;     /* a copy read back: the spool's cursor may pass it */
} s_ways[] = {
    [FH_GONE_COMPLETED] = {FH_OUTCOME_COMPLETED, false, true},
    [FH_GONE_FAILED] = {FH_OUTCOME_FAILED, false, true},
    [FH_GONE_ABANDONED] = {FH_OUTCOME_DROPPED, false, false},
    [FH_GONE_COALESCED] = {FH_OUTCOME_COALESCED, true, true},
    [FH_GONE_EVICTED] = {FH_OUTCOME_DROPPED, true, false},
    [FH_GONE_WRITTEN] = {FH_OUTCOME_NONE, false, false},
    [FH_GONE_KEPT] = {FH_OUTCOME_SPILLED, false, false},
    [FH_GONE_SPILL_FAILED] = {FH_OUTCOME_DROPPED, false, false},
    [FH_GONE_UNWRITTEN] = {FH_OUTCOME_NONE, false, false},
    [FH_GONE_HANDED_OVER] = {FH_OUTCOME_SPILLED, false, false},
    [FH_GONE_UNREAD] = {FH_OUTCOME_DROPPED, false, false},
    [FH_GONE_UNHANDLED] = {FH_OUTCOME_NONE, false, false},
};

void
fh_cons_tell (fh_consumer_t *self, fh_emit_t *emit, fh_outcome_t outcome)
{
    if (emit && outcome != FH_OUTCOME_NONE)
        fh_emit_set_outcome (emit, self->name, outcome);
}

/* The emit waiter of msg: its own, or its original's when it is a copy
   read back from the spool. */
fh_emit_t *
fh_cons_emit_of (const fh_msg_t *msg)
{
    /* A copy's deferral is set before anyone else sees the copy; an
       original's is the enqueuer's to write, and not read here. */
    return msg->from_spool && msg->deferral ? msg->deferral->emit : msg->emit;
}

void
fh_cons_record_done (fh_consumer_t *self, uint64_t mark)
{
    fh_spool_done (self->spool, mark);
    fh_queue_kick (self->queue); /* the reader may wait for the window */
}

void
fh_cons_let_go (fh_consumer_t *self, fh_msg_t *msg, fh_gone_t way, fh_handled_t *handled,
                int64_t now_ns)
{
    if (s_ways[way].held)
        fh_cons_held_less (self, fh_cons_msg_bytes (msg));
    fh_cons_tell (self, fh_cons_emit_of (msg), s_ways[way].outcome);
    if (s_ways[way].record_done && msg->spool_mark && self->spool)
        fh_cons_record_done (self, msg->spool_mark);
    fh_msg_release_at (msg, handled, now_ns);
}

void
fh_cons_let_go_copy (fh_consumer_t *self, fh_deferral_t *deferral, fh_gone_t way,
                     fh_handled_t *handled)
{
    fh_cons_tell (self, deferral->emit, s_ways[way].outcome);
    fh_deferral_release (deferral, handled, 0);
}
