/*  emit - waiting for one message to be handled. See emit.h. */
#include "emit.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *consumer;
    fh_outcome_t outcome;
} s_outcome_t;

struct fh_emit {
    atomic_int refs;
    atomic_bool handled;
    atomic_int matched; /* -2 until routed */
    /* Written by consumer threads and the enqueuer, read by the control
       actor: few, and only for emitted messages, so a lock will do. */
    pthread_mutex_t lock;
    s_outcome_t *outcomes;
    size_t count, room;
    fh_emit_notify_fn *notify; /* set before the hand-over, or NULL */
    void *notify_arg;
    /* Set before the hand-over: the one consumer, or NULL. Atomic: the
       hand-over through a ZeroMQ socket orders nothing C11 sees. */
    _Atomic (char *) target;
};

fh_emit_t *
fh_emit_new (size_t consumer_count)
{
    fh_emit_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->room = consumer_count ? consumer_count : 1;
    self->outcomes = calloc (self->room, sizeof *self->outcomes);
    if (!self->outcomes) {
        free (self);
        return NULL;
    }
    pthread_mutex_init (&self->lock, NULL);
    atomic_init (&self->refs, 2);
    atomic_init (&self->handled, false);
    atomic_init (&self->target, NULL);
    atomic_init (&self->matched, -2);
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
    if (atomic_fetch_sub_explicit (&self->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < self->count; i++)
        free (self->outcomes[i].consumer);
    free (self->outcomes);
    free (atomic_load_explicit (&self->target, memory_order_relaxed));
    pthread_mutex_destroy (&self->lock);
    free (self);
}

int
fh_emit_set_target (fh_emit_t *self, const char *consumer)
{
    char *copy = strdup (consumer);
    free (atomic_exchange_explicit (&self->target, copy, memory_order_acq_rel));
    return copy ? 0 : -1;
}

const char *
fh_emit_target (fh_emit_t *self)
{
    return atomic_load_explicit (&self->target, memory_order_acquire);
}

void
fh_emit_unref (fh_emit_t **self_p)
{
    if (*self_p)
        s_unref (*self_p);
    *self_p = NULL;
}

/* Under lock: the entry of that consumer, or NULL. */
static s_outcome_t *
s_find (fh_emit_t *self, const char *consumer)
{
    for (size_t i = 0; i < self->count; i++)
        if (strcmp (self->outcomes[i].consumer, consumer) == 0)
            return &self->outcomes[i];
    return NULL;
}

void
fh_emit_set_outcome (fh_emit_t *self, const char *consumer, fh_outcome_t outcome)
{
    pthread_mutex_lock (&self->lock);
    s_outcome_t *entry = s_find (self, consumer);
    if (!entry && self->count == self->room) {
        /* A reload added consumers since the request came. */
        s_outcome_t *grown = realloc (self->outcomes, self->room * 2 * sizeof *grown);
        if (grown) {
            self->outcomes = grown;
            self->room *= 2;
        }
    }
    if (!entry && self->count < self->room) {
        char *name = strdup (consumer);
        if (name) {
            entry = &self->outcomes[self->count++];
            entry->consumer = name;
        }
    }
    if (entry) /* out of memory: the answer lacks this consumer */
        entry->outcome = outcome;
    pthread_mutex_unlock (&self->lock);
}

fh_outcome_t
fh_emit_outcome (fh_emit_t *self, const char *consumer)
{
    pthread_mutex_lock (&self->lock);
    s_outcome_t *entry = s_find (self, consumer);
    fh_outcome_t outcome = entry ? entry->outcome : FH_OUTCOME_NONE;
    pthread_mutex_unlock (&self->lock);
    return outcome;
}

void
fh_emit_each_outcome (fh_emit_t *self,
                      void (*fn) (const char *consumer, fh_outcome_t outcome, void *arg), void *arg)
{
    pthread_mutex_lock (&self->lock);
    for (size_t i = 0; i < self->count; i++)
        fn (self->outcomes[i].consumer, self->outcomes[i].outcome, arg);
    pthread_mutex_unlock (&self->lock);
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
