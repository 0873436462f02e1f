/*  emit - waiting for one message to be handled. See emit.h. */
#include "emit.h"

#include <stdlib.h>

struct fh_emit {
    atomic_int refs;
    atomic_bool handled;
    atomic_int matched; /* -2 until routed */
    fh_emit_notify_fn *notify; /* set before the hand-over, or NULL */
    void *notify_arg;
    size_t consumer_count;
    atomic_int outcomes[];
};

fh_emit_t *
fh_emit_new (size_t consumer_count)
{
    fh_emit_t *self = malloc (sizeof *self + consumer_count * sizeof (atomic_int));
    if (!self)
        return NULL;
    atomic_init (&self->refs, 2);
    atomic_init (&self->handled, false);
    atomic_init (&self->matched, -2);
    self->consumer_count = consumer_count;
    self->notify = NULL;
    self->notify_arg = NULL;
    for (size_t i = 0; i < consumer_count; i++)
        atomic_init (&self->outcomes[i], FH_OUTCOME_NONE);
    /* Released here, acquired by the enqueuer (fh_emit_acquire): the
       hand-over through a ZeroMQ socket orders nothing that C11 sees. */
    atomic_store_explicit (&self->refs, 2, memory_order_release);
    return self;
}

void
fh_emit_acquire (fh_emit_t *self)
{
    (void) atomic_load_explicit (&self->refs, memory_order_acquire);
}

static void
s_unref (fh_emit_t *self)
{
    if (atomic_fetch_sub_explicit (&self->refs, 1, memory_order_acq_rel) == 1)
        free (self);
}

void
fh_emit_unref (fh_emit_t **self_p)
{
    if (*self_p)
        s_unref (*self_p);
    *self_p = NULL;
}

void
fh_emit_set_outcome (fh_emit_t *self, size_t consumer, fh_outcome_t outcome)
{
    if (consumer < self->consumer_count)
        atomic_store_explicit (&self->outcomes[consumer], (int) outcome, memory_order_release);
}

fh_outcome_t
fh_emit_outcome (fh_emit_t *self, size_t consumer)
{
    if (consumer >= self->consumer_count)
        return FH_OUTCOME_NONE;
    return (fh_outcome_t) atomic_load_explicit (&self->outcomes[consumer], memory_order_acquire);
}

void
fh_emit_routed (fh_emit_t *self, int matched)
{
    atomic_store_explicit (&self->matched, matched, memory_order_release);
}

int
fh_emit_matched (fh_emit_t *self)
{
    return atomic_load_explicit (&self->matched, memory_order_acquire);
}

size_t
fh_emit_consumer_count (const fh_emit_t *self)
{
    return self->consumer_count;
}

void
fh_emit_set_notify (fh_emit_t *self, fh_emit_notify_fn *notify, void *arg)
{
    self->notify = notify;
    self->notify_arg = arg;
    /* Published like fh_emit_new's fields: the waiter is still the
       caller's alone, and fh_emit_acquire pairs with this store. */
    atomic_store_explicit (&self->refs, atomic_load_explicit (&self->refs, memory_order_relaxed),
                           memory_order_release);
}

void
fh_emit_handled (fh_emit_t *self)
{
    atomic_store_explicit (&self->handled, true, memory_order_release);
    if (self->notify)
        self->notify (self->notify_arg);
    s_unref (self);
}

void
fh_emit_abandon (fh_emit_t *self)
{
    fh_emit_handled (self);
}

bool
fh_emit_is_handled (fh_emit_t *self)
{
    return atomic_load_explicit (&self->handled, memory_order_acquire);
}

const char *
fh_outcome_name (fh_outcome_t outcome)
{
    switch (outcome) {
    case FH_OUTCOME_NONE: return "not matched";
    case FH_OUTCOME_PENDING: return "pending";
    case FH_OUTCOME_COMPLETED: return "completed";
    case FH_OUTCOME_FAILED: return "failed";
    case FH_OUTCOME_DROPPED: return "dropped";
    case FH_OUTCOME_COALESCED: return "coalesced";
    case FH_OUTCOME_SPILLED: return "spilled";
    }
    return "unknown";
}
