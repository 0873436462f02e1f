/*  queue - a consumer's bounded queue: single producer, single consumer.

    The enqueuer thread pushes message pointers; the consumer's thread pops
    them, in the same order. The capacity is exact. Neither side takes a
    lock while the queue is neither empty nor full: the producer's and the
    consumer's indices live on separate cache lines and each side caches
    the other's index. The consumer parks on a futex only when it finds
    the queue empty, and the producer pays for a wake-up (one futex call,
    no lock) only when the consumer is asleep, and then once for a run of
    pushes, not per message.

    Storage grows with the backlog: a new queue allocates a few dozen
    slots, and doubles them when a push finds them all taken, up to
    `capacity`. Out of memory for a larger ring, the queue is full early.

    fh_queue_close is the producer's "no more": the consumer drains what is
    queued, and then fh_queue_wait answers false.
*/
#ifndef FH_QUEUE_H_INCLUDED
#define FH_QUEUE_H_INCLUDED

#include "message.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct fh_queue fh_queue_t;

/* capacity >= 1. NULL when out of memory. */
fh_queue_t *fh_queue_new (size_t capacity);
/* Releases every message still queued. Safe with NULL and twice. */
void fh_queue_destroy (fh_queue_t **self_p);

/* Producer: appends msg; false (and msg untouched) when full. A sleeping
   consumer is woken every few pushes, not at each: after the last push of
   a run, call fh_queue_signal. */
bool fh_queue_push (fh_queue_t *self, fh_msg_t *msg);
/* Producer: wakes the consumer if it sleeps with messages pushed since the
   last signal. Costs nothing when nothing was pushed since. */
void fh_queue_signal (fh_queue_t *self);
/* Producer: true when a push would fail now. False means the next push
   succeeds (it may grow the storage to make the room). */
bool fh_queue_full (fh_queue_t *self);
/* Producer, for queues made with fh_queue_set_evictable: takes the oldest
   message off the head (the caller releases it), or NULL when empty. */
fh_msg_t *fh_queue_evict (fh_queue_t *self);
/* Before use: the producer may evict, so pops must take the head with a
   compare-and-swap. */
void fh_queue_set_evictable (fh_queue_t *self);
/* Producer: wakes a waiting consumer without pushing (it has something
   else to look at, such as its spool). */
void fh_queue_kick (fh_queue_t *self);
/* Producer: no more pushes; wakes the consumer. */
void fh_queue_close (fh_queue_t *self);

/* Consumer: the oldest message, or NULL when empty. */
fh_msg_t *fh_queue_pop (fh_queue_t *self);
/* Consumer: waits until a message is queued or the producer kicked
   (true), or the queue is closed and empty (false). */
bool fh_queue_wait (fh_queue_t *self);
/* Consumer: fh_queue_wait, counting a kick since `kicks` (a reading of
   fh_queue_kicks taken before the caller looked at its other sources), so
   that a kick between that look and the wait is not missed. */
bool fh_queue_wait_since (fh_queue_t *self, unsigned kicks);
/* Anyone: the number of kicks so far. */
unsigned fh_queue_kicks (fh_queue_t *self);
/* Anyone: fh_queue_close was called. */
bool fh_queue_closed (fh_queue_t *self);

/* Producer: how many are queued, exactly, reading the consumer's index
   (a cache-line transfer: call it when the answer matters). */
size_t fh_queue_depth (fh_queue_t *self);
/* Producer: a bound above the depth that costs nothing (it uses the
   producer's last look at the consumer's index). */
size_t fh_queue_depth_bound (const fh_queue_t *self);

/* Either side, or a third thread: how many are queued right now. */
size_t fh_queue_size (fh_queue_t *self);
size_t fh_queue_capacity (const fh_queue_t *self);
/* Producer: how many slots are allocated now (a power of two, at most the
   least one >= capacity). */
size_t fh_queue_slots (fh_queue_t *self);

#endif
