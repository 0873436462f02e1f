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
    left at teardown. The way it leaves (fh_gone_t) says what that costs:
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

atomic_uint_fast64_t fh_cons_memory_held;
atomic_uint_fast64_t fh_cons_memory_max;

void
fh_consumer_set_memory_max (uint64_t max_bytes)
{
    atomic_store (&fh_cons_memory_max, max_bytes);
}

void
fh_cons_record_done (fh_consumer_t *self, uint64_t mark)
{
    fh_spool_done (self->spool, mark);
    fh_queue_kick (self->queue); /* the reader may wait for the window */
}

void
fh_cons_let_go_copy (fh_consumer_t *self, fh_deferral_t *deferral, fh_gone_t way,
                     fh_handled_t *handled)
{
    fh_cons_tell (self, deferral->emit, fh_cons_gone_outcome (way));
    fh_deferral_release (deferral, handled, 0);
}
