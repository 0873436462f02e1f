/*  message - one bus message as the hub holds it. See message.h. */
#include "message.h"

#include "clock.h"
#include "emit.h"

#include <stdlib.h>

fh_msg_t *
fh_msg_new (zmq_msg_t *frames, uint32_t count, uint64_t seq, int64_t received_ns)
{
    fh_msg_t *self = malloc (sizeof *self + count * sizeof (zmq_msg_t));
    if (!self)
        return NULL;
    atomic_init (&self->holders, 0);
    self->frame_count = count;
    self->seq = seq;
    self->received_ns = received_ns;
    self->emit = NULL;
    self->from_spool = false;
    for (uint32_t i = 0; i < count; i++) {
        zmq_msg_init (&self->frames[i]);
        zmq_msg_move (&self->frames[i], &frames[i]);
    }
    return self;
}

void
fh_msg_destroy (fh_msg_t **self_p)
{
    fh_msg_t *self = *self_p;
    if (!self)
        return;
    for (uint32_t i = 0; i < self->frame_count; i++)
        zmq_msg_close (&self->frames[i]);
    free (self);
    *self_p = NULL;
}

void
fh_handled_init (fh_handled_t *self)
{
    atomic_init (&self->handled, 0);
    fh_histogram_init (&self->end_to_end);
}

void
fh_msg_release (fh_msg_t *self, fh_handled_t *handled)
{
    /* acq_rel: the freeing thread must see every other holder's reads done. */
    if (atomic_fetch_sub_explicit (&self->holders, 1, memory_order_acq_rel) != 1)
        return;
    if (handled && !self->from_spool) {
        fh_histogram_record (&handled->end_to_end, fh_clock_mono_ns () - self->received_ns);
        atomic_store_explicit (&handled->handled,
                               atomic_load_explicit (&handled->handled, memory_order_relaxed) + 1,
                               memory_order_release);
    }
    if (self->emit)
        fh_emit_handled (self->emit);
    fh_msg_destroy (&self);
}
