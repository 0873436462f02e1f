/*  enqueuer_swap - SWAP: the enqueuer takes a reload's routing table (the
    trigger table and the consumers) between two messages, or in the
    middle of one a `block` consumer holds up; the SUB socket's
    subscriptions follow the new table.
*/
#include "enqueuer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A reload's new routing: trigger table and consumers. */
struct fh_enq_swap {
    fh_trigger_t *trigger;
    fh_consumer_t **consumers;
    size_t consumer_count;
    fh_consumer_t **fold_from; /* or NULL */
    bool *folded;
    atomic_bool ready; /* release/acquire: the pipe orders nothing C11 sees */
    atomic_bool done;  /* ... in either direction */
};

/* A swap in the middle of handing out a message: once acknowledged, the
   consumers of the old table that are not in the new one may be gone.
   The message still goes to those that stay, to the new instance of a
   replaced one (the same name: it follows its predecessor's messages),
   and is counted as dropped by a removed one, here, before the ack. */
static void
s_reaim_targets (fh_enqueuer_t *self, const fh_enq_swap_t *swap)
{
    for (size_t i = self->target_next; i < self->target_count; i++) {
        fh_consumer_t *target = self->targets[i];
        if (!target)
            continue;
        fh_consumer_t *next = NULL;
        size_t at = 0;
        for (size_t j = 0; j < swap->consumer_count && !next; j++)
            if (swap->consumers[j] == target)
                next = target, at = j;
        for (size_t j = 0; j < swap->consumer_count && !next; j++)
            if (strcmp (fh_consumer_name (swap->consumers[j]), fh_consumer_name (target)) == 0)
                next = swap->consumers[j], at = j;
        if (!next)
            fh_consumer_count_drop (target, self->target_msg);
        self->targets[i] = next;
        self->matches[i] = (uint32_t) at; /* its index in the new table */
    }
}

static bool
s_in_list (const char *const *list, size_t count, const char *s)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp (list[i], s) == 0)
            return true;
    return false;
}

/* Applies a swap between two messages: the SUB socket's subscriptions
   follow the new table (each prefix was subscribed once: unsubscribe what
   is gone, subscribe what is new). */
int
fh_enq_apply_swap (fh_enqueuer_t *self, fh_enq_swap_t *swap, void *sub)
{
    (void) atomic_load_explicit (&swap->ready, memory_order_acquire);
    fh_enq_signal_all (self); /* the outgoing table's consumers too */
    if (swap->consumer_count > self->consumer_count) {
        uint32_t *matches = realloc (self->matches, swap->consumer_count * sizeof *matches);
        if (!matches)
            return -1;
        self->matches = matches;
        uint32_t *offered = realloc (self->offered, swap->consumer_count * sizeof *offered);
        if (!offered)
            return -1;
        self->offered = offered;
        bool *mark = realloc (self->offered_mark, swap->consumer_count * sizeof *mark);
        if (!mark)
            return -1;
        self->offered_mark = mark;
        memset (mark, 0, swap->consumer_count * sizeof *mark); /* none: just signalled */
        fh_consumer_t **targets = realloc (self->targets, swap->consumer_count * sizeof *targets);
        if (!targets)
            return -1;
        self->targets = targets;
    }
    /* Instances that never started hand their queues to their
       successors before anything new reaches those: order kept, and a
       reload storm holds one waiting instance's worth per consumer. */
    for (size_t i = 0; swap->fold_from && i < swap->consumer_count; i++)
        if (swap->fold_from[i])
            swap->folded[i]
                = fh_consumer_fold_into (swap->fold_from[i], swap->consumers[i], &self->handled);
    s_reaim_targets (self, swap);
    const char *const *old_list, *const *new_list;
    size_t old_count = fh_trigger_subscriptions (self->trigger, &old_list);
    size_t new_count = fh_trigger_subscriptions (swap->trigger, &new_list);
    for (size_t i = 0; i < new_count; i++)
        if (!s_in_list (old_list, old_count, new_list[i]))
            zmq_setsockopt (sub, ZMQ_SUBSCRIBE, new_list[i], strlen (new_list[i]));
    for (size_t i = 0; i < old_count; i++)
        if (!s_in_list (new_list, new_count, old_list[i]))
            zmq_setsockopt (sub, ZMQ_UNSUBSCRIBE, old_list[i], strlen (old_list[i]));
    self->trigger = swap->trigger;
    self->consumers = swap->consumers;
    self->consumer_count = swap->consumer_count;
    atomic_store_explicit (&swap->done, true, memory_order_release);
    return 0;
}

int
fh_enqueuer_swap (fh_enqueuer_t *self, fh_trigger_t *trigger, fh_consumer_t **consumers,
                  size_t consumer_count, fh_consumer_t **fold_from, bool *folded, char *err,
                  size_t errlen)
{
    fh_enq_swap_t swap = {trigger, consumers, consumer_count, fold_from, folded, false, false};
    atomic_store_explicit (&swap.ready, true, memory_order_release);
    if (!self->actor || zsock_send (self->actor, "sp", "SWAP", &swap) != 0
        || zsock_wait (self->actor) != 0
        || !atomic_load_explicit (&swap.done, memory_order_acquire)) {
        snprintf (err, errlen, "the enqueuer did not take the new routing");
        return -1;
    }
    return 0;
}
