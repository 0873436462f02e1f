/*  message - one bus message as the hub holds it. See message.h. */
#include "message.h"

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
fh_msg_release (fh_msg_t *self)
{
    /* acq_rel: the freeing thread must see every other holder's reads done. */
    if (atomic_fetch_sub_explicit (&self->holders, 1, memory_order_acq_rel) == 1)
        fh_msg_destroy (&self);
}
