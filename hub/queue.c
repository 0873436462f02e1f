/*  queue - a consumer's bounded single-producer single-consumer queue.

    A ring of 2^k slots (k the least with 2^k >= capacity); head and tail
    count up forever and are masked to index, so full is tail - head ==
    capacity and empty is tail == head. See queue.h.

    Sleeping without losing a wake-up: the consumer sets `sleeping` and
    then re-reads `tail`; the producer publishes `tail`, and when it
    signals, it passes a sequentially consistent fence and then reads
    `sleeping`. So at least one side sees the other's write: either the
    consumer sees the message, or the producer sees the sleeper and wakes
    it under the mutex the consumer holds from its check until cond_wait
    releases it.

    The producer does not look for a sleeper at every push: a wake-up (a
    futex call, and often a context switch) per message was the hub's
    largest cost. It signals every `signal_every` pushes, at most a quarter
    of the capacity so that a full queue never has a sleeping consumer, and
    whenever it has no more to push for now (fh_queue_signal).
*/
#include "queue.h"

#include <assert.h>
#include <pthread.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>

#define CACHE_LINE 64
#define SIGNAL_EVERY 32 /* pushes between looks for a sleeping consumer */

struct fh_queue {
    /* Written by the producer. */
    alignas (CACHE_LINE) atomic_size_t tail;
    size_t head_seen;   /* the producer's last look at head */
    size_t unsignalled; /* pushes since the last look for a sleeper */
    /* Written by the consumer. */
    alignas (CACHE_LINE) atomic_size_t head;
    size_t tail_seen; /* the consumer's last look at tail */
    /* Set once, or rarely written. */
    alignas (CACHE_LINE) size_t capacity;
    size_t mask;
    size_t signal_every;
    _Atomic (fh_msg_t *) *slots;
    atomic_bool sleeping;
    atomic_bool closed;
    atomic_uint kicks;    /* fh_queue_kick: wake-ups without a push */
    bool evictable;       /* pops compare-and-swap the head */
    pthread_mutex_t lock;
    pthread_cond_t wake;
};

fh_queue_t *
fh_queue_new (size_t capacity)
{
    assert (capacity >= 1);
    size_t slots = 1;
    while (slots < capacity)
        slots <<= 1;
    fh_queue_t *self = aligned_alloc (CACHE_LINE, sizeof *self);
    if (!self)
        return NULL;
    self->slots = calloc (slots, sizeof *self->slots);
    if (!self->slots) {
        free (self);
        return NULL;
    }
    atomic_init (&self->tail, 0);
    atomic_init (&self->head, 0);
    self->head_seen = 0;
    self->unsignalled = 0;
    self->tail_seen = 0;
    self->capacity = capacity;
    self->signal_every = capacity / 4 < SIGNAL_EVERY ? capacity / 4 : SIGNAL_EVERY;
    if (self->signal_every == 0)
        self->signal_every = 1;
    self->mask = slots - 1;
    atomic_init (&self->sleeping, false);
    atomic_init (&self->closed, false);
    atomic_init (&self->kicks, 0);
    self->evictable = false;
    pthread_mutex_init (&self->lock, NULL);
    pthread_cond_init (&self->wake, NULL);
    return self;
}

void
fh_queue_destroy (fh_queue_t **self_p)
{
    fh_queue_t *self = *self_p;
    if (!self)
        return;
    fh_msg_t *msg;
    while ((msg = fh_queue_pop (self)))
        fh_msg_release (msg, NULL);
    pthread_mutex_destroy (&self->lock);
    pthread_cond_destroy (&self->wake);
    free (self->slots);
    free (self);
    *self_p = NULL;
}

static void
s_wake (fh_queue_t *self)
{
    pthread_mutex_lock (&self->lock);
    pthread_cond_signal (&self->wake);
    pthread_mutex_unlock (&self->lock);
}

bool
fh_queue_full (fh_queue_t *self)
{
    size_t tail = atomic_load_explicit (&self->tail, memory_order_relaxed);
    if (tail - self->head_seen < self->capacity)
        return false;
    self->head_seen = atomic_load_explicit (&self->head, memory_order_acquire);
    return tail - self->head_seen >= self->capacity;
}

bool
fh_queue_push (fh_queue_t *self, fh_msg_t *msg)
{
    size_t tail = atomic_load_explicit (&self->tail, memory_order_relaxed);
    if (tail - self->head_seen >= self->capacity) {
        self->head_seen = atomic_load_explicit (&self->head, memory_order_acquire);
        if (tail - self->head_seen >= self->capacity)
            return false;
    }
    atomic_store_explicit (&self->slots[tail & self->mask], msg, memory_order_relaxed);
    atomic_store_explicit (&self->tail, tail + 1, memory_order_release);
    if (++self->unsignalled >= self->signal_every)
        fh_queue_signal (self);
    return true;
}

void
fh_queue_signal (fh_queue_t *self)
{
    if (!self->unsignalled)
        return;
    self->unsignalled = 0;
    atomic_thread_fence (memory_order_seq_cst);
    if (atomic_load_explicit (&self->sleeping, memory_order_seq_cst))
        s_wake (self);
}

size_t
fh_queue_depth (fh_queue_t *self)
{
    self->head_seen = atomic_load_explicit (&self->head, memory_order_acquire);
    return atomic_load_explicit (&self->tail, memory_order_relaxed) - self->head_seen;
}

size_t
fh_queue_depth_bound (const fh_queue_t *self)
{
    return atomic_load_explicit (&self->tail, memory_order_relaxed) - self->head_seen;
}

void
fh_queue_close (fh_queue_t *self)
{
    atomic_store (&self->closed, true);
    pthread_mutex_lock (&self->lock);
    pthread_cond_broadcast (&self->wake);
    pthread_mutex_unlock (&self->lock);
}

fh_msg_t *
fh_queue_pop (fh_queue_t *self)
{
    size_t head = atomic_load_explicit (&self->head, memory_order_acquire);
    while (true) {
        /* Evictions move head on by themselves, possibly past the cached
           tail: "empty" is head at or past it, not only equal. */
        if ((ptrdiff_t) (self->tail_seen - head) <= 0) {
            self->tail_seen = atomic_load_explicit (&self->tail, memory_order_acquire);
            if ((ptrdiff_t) (self->tail_seen - head) <= 0)
                return NULL;
        }
        fh_msg_t *msg = atomic_load_explicit (&self->slots[head & self->mask],
                                              memory_order_relaxed);
        if (!self->evictable) {
            atomic_store_explicit (&self->head, head + 1, memory_order_release);
            return msg;
        }
        /* The producer may have taken this one meanwhile: then retry with
           the head it left (the value read above is discarded). */
        if (atomic_compare_exchange_weak_explicit (&self->head, &head, head + 1,
                                                   memory_order_acq_rel, memory_order_acquire))
            return msg;
    }
}

fh_msg_t *
fh_queue_evict (fh_queue_t *self)
{
    size_t tail = atomic_load_explicit (&self->tail, memory_order_relaxed);
    size_t head = atomic_load_explicit (&self->head, memory_order_acquire);
    while (head != tail) {
        fh_msg_t *msg = atomic_load_explicit (&self->slots[head & self->mask],
                                              memory_order_relaxed);
        if (atomic_compare_exchange_weak_explicit (&self->head, &head, head + 1,
                                                   memory_order_acq_rel, memory_order_acquire)) {
            self->head_seen = head + 1;
            return msg;
        }
    }
    return NULL;
}

void
fh_queue_set_evictable (fh_queue_t *self)
{
    self->evictable = true;
}

void
fh_queue_kick (fh_queue_t *self)
{
    atomic_fetch_add_explicit (&self->kicks, 1, memory_order_seq_cst);
    if (atomic_load_explicit (&self->sleeping, memory_order_seq_cst))
        s_wake (self);
}

bool
fh_queue_closed (fh_queue_t *self)
{
    return atomic_load (&self->closed);
}

bool
fh_queue_wait (fh_queue_t *self)
{
    return fh_queue_wait_since (self, atomic_load_explicit (&self->kicks, memory_order_seq_cst));
}

unsigned
fh_queue_kicks (fh_queue_t *self)
{
    return atomic_load_explicit (&self->kicks, memory_order_seq_cst);
}

bool
fh_queue_wait_since (fh_queue_t *self, unsigned kicks)
{
    size_t head = atomic_load_explicit (&self->head, memory_order_acquire);
    if (atomic_load_explicit (&self->tail, memory_order_acquire) != head)
        return true;
    pthread_mutex_lock (&self->lock);
    atomic_store_explicit (&self->sleeping, true, memory_order_seq_cst);
    while (atomic_load_explicit (&self->tail, memory_order_seq_cst) == head
           && atomic_load_explicit (&self->kicks, memory_order_seq_cst) == kicks
           && !atomic_load (&self->closed)) {
        pthread_cond_wait (&self->wake, &self->lock);
        /* An eviction moves head: compare against the current one. */
        head = atomic_load_explicit (&self->head, memory_order_acquire);
    }
    if (atomic_load_explicit (&self->kicks, memory_order_relaxed) != kicks) {
        atomic_store_explicit (&self->sleeping, false, memory_order_relaxed);
        pthread_mutex_unlock (&self->lock);
        return true;
    }
    atomic_store_explicit (&self->sleeping, false, memory_order_relaxed);
    pthread_mutex_unlock (&self->lock);
    return atomic_load_explicit (&self->tail, memory_order_acquire) != head;
}

size_t
fh_queue_size (fh_queue_t *self)
{
    size_t head = atomic_load_explicit (&self->head, memory_order_acquire);
    size_t tail = atomic_load_explicit (&self->tail, memory_order_acquire);
    return tail >= head ? tail - head : 0; /* a racy read may see them cross */
}

size_t
fh_queue_capacity (const fh_queue_t *self)
{
    return self->capacity;
}
