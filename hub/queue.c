/*  queue - a consumer's bounded single-producer single-consumer queue.

    A ring of 2^k slots; head and tail count up forever and are masked to
    index, so full is tail - head == capacity and empty is tail == head.
    See queue.h.

    Storage grows on demand. A new queue holds a small ring (at most
    INITIAL_SLOTS); when the producer finds the ring full and the queue
    still below its capacity, it allocates a ring twice as large, copies
    the live slots into it and publishes it (release) before the push that
    needed it. The consumer loads the ring after it has read `tail`
    (acquire), so the ring it reads holds every slot below that tail; a
    slot it reads in an older ring was copied unchanged into the newer one.
    A thousand idle consumers with `capacity: 100000` so cost a few KiB
    each, not 1 MiB each. An old ring is freed once the consumer has said
    (ring_acked) that it reads the current one; until then it waits on the
    `retired` list. Without memory for a larger ring, the queue counts as
    full at its current size.

    Sleeping without losing a wake-up: the consumer parks on a futex, the
    32-bit word `wake_seq`, which a waker increments before FUTEX_WAKE. The
    consumer reads wake_seq, then sets `sleeping`, passes a sequentially
    consistent fence and re-reads `tail`, the kicks and `closed`; a
    waker publishes what it has (tail, a kick, closed), passes a fence,
    and then reads `sleeping`. So at least one side sees the other's
    write: either the consumer sees the news and does not park, or the
    waker sees the sleeper, takes `sleeping` (an exchange: one wake per
    sleep) and increments wake_seq, which the consumer read before it set
    `sleeping`, so FUTEX_WAIT on the old value returns at once or is
    woken. There is no mutex: with mutex + condvar the woken consumer
    could preempt the waker while it still held the mutex, block on it,
    and cost two more context switches (see docs/performance.md).

    The producer does not look for a sleeper at every push: a wake-up (a
    futex call, and often a context switch) per message was the hub's
    largest cost. It signals every `signal_every` pushes, at most a quarter
    of the capacity so that a full queue never has a sleeping consumer, and
    whenever it has no more to push for now (fh_queue_signal).
*/
#include "queue.h"

#include "atomics.h"
#include "oom.h"

#include <assert.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Pushes between looks for a sleeping consumer. At 32, a consumer that
   gets 3 messages in 100 was woken for every 32 of its own under load
   (0.17 context switches a message); at 256, 0.03-0.05, and 20 % less hub
   CPU a delivery (docs/performance.md). A quiet bus is not slowed: the
   end of each run of pushes signals whatever is left. */
#define SIGNAL_EVERY 256
#define INITIAL_SLOTS 64 /* a new queue's ring: 512 bytes */

typedef struct s_ring {
    size_t mask;            /* slots - 1 */
    struct s_ring *retired; /* older rings, waiting to be freed */
    _Atomic (fh_msg_t *) slots[];
} s_ring_t;

struct fh_queue {
    /* Written by the producer. */
    alignas (FH_CACHE_LINE) atomic_size_t tail;
    size_t head_seen;   /* the producer's last look at head */
    size_t unsignalled; /* pushes since the last look for a sleeper */
    s_ring_t *retired;  /* rings replaced, the consumer may still read */
    size_t room;        /* the ring's slots or the capacity, the lesser */
    /* Written by the consumer. */
    alignas (FH_CACHE_LINE) atomic_size_t head;
    size_t tail_seen;                /* the consumer's last look at tail */
    s_ring_t *ring_used;             /* the ring the consumer reads */
    _Atomic (s_ring_t *) ring_acked; /* ring_used, for the producer */
    /* Set once, or rarely written. */
    alignas (FH_CACHE_LINE) size_t capacity;
    size_t max_slots; /* the least power of two >= capacity */
    size_t signal_every;
    _Atomic (s_ring_t *) ring; /* replaced only by the producer */
    atomic_bool sleeping;      /* the consumer parks, or is about to */
    atomic_uint wake_seq;      /* the futex word: one more per wake-up */
    atomic_bool closed;
    atomic_uint kicks; /* fh_queue_kick: wake-ups without a push */
    bool evictable;    /* pops compare-and-swap the head */
};

/* The futex word is a plain 32-bit integer to the kernel. */
_Static_assert(sizeof (atomic_uint) == sizeof (uint32_t), "atomic_uint is the futex word");

static s_ring_t *
s_ring_new (size_t slots)
{
    s_ring_t *ring = malloc (sizeof *ring + slots * sizeof ring->slots[0]);
    if (!ring)
        return NULL;
    ring->mask = slots - 1;
    ring->retired = NULL;
    return ring;
}

static void
s_ring_free_list (s_ring_t *ring)
{
    while (ring) {
        s_ring_t *next = ring->retired;
        free (ring);
        ring = next;
    }
}

/* Producer: the rings replaced are freed once the consumer reads the
   current one (it never goes back to an older ring). */
static void
s_reclaim (fh_queue_t *self)
{
    if (self->retired
        && atomic_load_explicit (&self->ring_acked, memory_order_acquire)
               == atomic_load_explicit (&self->ring, memory_order_relaxed)) {
        s_ring_free_list (self->retired);
        self->retired = NULL;
    }
}

/* Producer: replaces a full ring by one twice its size, holding the same
   slots from head_seen to tail. False when at max_slots or out of memory. */
static bool
s_grow (fh_queue_t *self, size_t tail)
{
    s_ring_t *old = atomic_load_explicit (&self->ring, memory_order_relaxed);
    size_t slots = (old->mask + 1) * 2;
    if (slots > self->max_slots)
        return false;
    s_reclaim (self);
    s_ring_t *ring = s_ring_new (slots);
    if (!ring) {
        fh_oom_note ("a consumer's queue could not grow; it counts as full (its overflow applies)");
        return false;
    }
    for (size_t i = self->head_seen; i != tail; i++)
        atomic_store_explicit (
            &ring->slots[i & ring->mask],
            atomic_load_explicit (&old->slots[i & old->mask], memory_order_relaxed),
            memory_order_relaxed);
    old->retired = self->retired;
    self->retired = old;
    atomic_store_explicit (&self->ring, ring, memory_order_release);
    self->room = slots < self->capacity ? slots : self->capacity;
    return true;
}

/* Producer: room for one more push, growing the ring if that is what it
   takes. */
static bool
s_room_slow (fh_queue_t *self, size_t tail)
{
    self->head_seen = atomic_load_explicit (&self->head, memory_order_acquire);
    size_t used = tail - self->head_seen;
    if (used >= self->capacity)
        return false;
    return used < self->room || s_grow (self, tail);
}

static inline bool
s_room (fh_queue_t *self, size_t tail)
{
    return tail - self->head_seen < self->room || s_room_slow (self, tail);
}

/* Consumer: the ring to read, loaded after tail was. */
static inline s_ring_t *
s_consumer_ring (fh_queue_t *self)
{
    s_ring_t *ring = atomic_load_explicit (&self->ring, memory_order_acquire);
    if (ring != self->ring_used) {
        self->ring_used = ring;
        atomic_store_explicit (&self->ring_acked, ring, memory_order_release);
    }
    return ring;
}

fh_queue_t *
fh_queue_new (size_t capacity)
{
    assert (capacity >= 1);
    size_t max_slots = 1;
    while (max_slots < capacity)
        max_slots <<= 1;
    fh_queue_t *self = aligned_alloc (FH_CACHE_LINE, sizeof *self);
    if (!self)
        return NULL;
    s_ring_t *ring = s_ring_new (max_slots < INITIAL_SLOTS ? max_slots : INITIAL_SLOTS);
    if (!ring) {
        free (self);
        return NULL;
    }
    atomic_init (&self->ring, ring);
    atomic_init (&self->ring_acked, ring);
    self->ring_used = ring;
    self->retired = NULL;
    self->max_slots = max_slots;
    self->room = ring->mask + 1 < capacity ? ring->mask + 1 : capacity;
    atomic_init (&self->tail, 0);
    atomic_init (&self->head, 0);
    self->head_seen = 0;
    self->unsignalled = 0;
    self->tail_seen = 0;
    self->capacity = capacity;
    self->signal_every = capacity / 4 < SIGNAL_EVERY ? capacity / 4 : SIGNAL_EVERY;
    if (self->signal_every == 0)
        self->signal_every = 1;
    atomic_init (&self->sleeping, false);
    atomic_init (&self->wake_seq, 0);
    atomic_init (&self->closed, false);
    atomic_init (&self->kicks, 0);
    self->evictable = false;
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
    s_ring_free_list (self->retired);
    free (atomic_load_explicit (&self->ring, memory_order_relaxed));
    free (self);
    *self_p = NULL;
}

static void
s_futex_wake (fh_queue_t *self, int waiters)
{
    atomic_fetch_add_explicit (&self->wake_seq, 1, memory_order_release);
    syscall (SYS_futex, (uint32_t *) &self->wake_seq, FUTEX_WAKE_PRIVATE, waiters, NULL, NULL, 0);
}

/* Waker, after publishing its news: wakes the consumer if it parks. The
   fence pairs with the consumer's (see the top of this file). */
static void
s_wake_sleeper (fh_queue_t *self)
{
    atomic_thread_fence (memory_order_seq_cst);
    if (atomic_load_explicit (&self->sleeping, memory_order_relaxed)
        && atomic_exchange_explicit (&self->sleeping, false, memory_order_relaxed))
        s_futex_wake (self, 1);
}

bool
fh_queue_full (fh_queue_t *self)
{
    return !s_room (self, atomic_load_explicit (&self->tail, memory_order_relaxed));
}

bool
fh_queue_push (fh_queue_t *self, fh_msg_t *msg)
{
    size_t tail = atomic_load_explicit (&self->tail, memory_order_relaxed);
    if (!s_room (self, tail))
        return false;
    s_ring_t *ring = atomic_load_explicit (&self->ring, memory_order_relaxed);
    atomic_store_explicit (&ring->slots[tail & ring->mask], msg, memory_order_relaxed);
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
    s_reclaim (self);
    s_wake_sleeper (self);
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
    s_futex_wake (self, INT_MAX);
}

/* The consumer, popping head: starts loading the next message already
   pushed. One that gets 3 messages in 100 wakes to messages made up to a
   held wake-up earlier, gone from the cache; its first read of each was
   most of the routing case's consumer time (docs/performance.md). A
   prefetch never faults, so a slot the producer reuses (drop-oldest)
   costs nothing but the load. */
static inline void
s_prefetch_next (fh_queue_t *self, s_ring_t *ring, size_t head)
{
    if ((ptrdiff_t) (self->tail_seen - (head + 1)) > 0)
        __builtin_prefetch (
            atomic_load_explicit (&ring->slots[(head + 1) & ring->mask], memory_order_relaxed));
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
        s_ring_t *ring = s_consumer_ring (self);
        fh_msg_t *msg
            = atomic_load_explicit (&ring->slots[head & ring->mask], memory_order_relaxed);
        s_prefetch_next (self, ring, head);
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
    s_ring_t *ring = atomic_load_explicit (&self->ring, memory_order_relaxed);
    while (head != tail) {
        fh_msg_t *msg
            = atomic_load_explicit (&ring->slots[head & ring->mask], memory_order_relaxed);
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
    s_wake_sleeper (self);
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

/* Consumer: nothing to do now, as far as the queue knows? */
static inline bool
s_nothing_new (fh_queue_t *self, size_t head, unsigned kicks)
{
    return atomic_load_explicit (&self->tail, memory_order_acquire) == head
           && atomic_load_explicit (&self->kicks, memory_order_acquire) == kicks
           && !atomic_load_explicit (&self->closed, memory_order_acquire);
}

bool
fh_queue_wait_since (fh_queue_t *self, unsigned kicks)
{
    size_t head = atomic_load_explicit (&self->head, memory_order_acquire);
    while (s_nothing_new (self, head, kicks)) {
        unsigned seq = atomic_load_explicit (&self->wake_seq, memory_order_acquire);
        atomic_store_explicit (&self->sleeping, true, memory_order_relaxed);
        atomic_thread_fence (memory_order_seq_cst);
        if (s_nothing_new (self, head, kicks))
            /* Returns at once when wake_seq moved since it was read; a
               spurious return (a signal) just goes round again. */
            syscall (SYS_futex, (uint32_t *) &self->wake_seq, FUTEX_WAIT_PRIVATE, seq, NULL, NULL,
                     0);
        atomic_store_explicit (&self->sleeping, false, memory_order_relaxed);
        /* An eviction moves head: compare against the current one. */
        head = atomic_load_explicit (&self->head, memory_order_acquire);
    }
    if (atomic_load_explicit (&self->kicks, memory_order_acquire) != kicks)
        return true;
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

size_t
fh_queue_slots (fh_queue_t *self)
{
    return atomic_load_explicit (&self->ring, memory_order_relaxed)->mask + 1;
}
