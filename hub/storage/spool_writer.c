/*  spool_writer - a spool's appender on a thread of its own. See
    spool_writer.h.

    The hand-off is a ring of (item, frame count, bytes) with one
    producer (the putter) and one consumer (the writer), each advancing
    its own counter: put_seq, then take_seq. A put with a free slot
    takes no lock: it fills the slot at put_seq and publishes it with a
    release store (on a bus that spills every message, a lock per put cost
    more than the rest of the hand-off). Nor does it add to a shared count:
    what the ring holds and what is not yet settled are differences of
    counters each side keeps of its own (put_seq and put_bytes the
    putter's; take_seq, taken_bytes and settled_seq the writer's), so that
    a put makes two locked operations, not four. The lock guards what is rare: the
    ring doubling (up to max_items; a consumer that never spills costs a
    few KiB, not its bound), the writer's copy of the ring into its own
    batch (so a doubling never moves slots under it), and every wait. The
    writer describes, writes and reports outside it, so a put never waits
    for the disk.

    Wake-ups. A put wakes the writer only when it sleeps, or paces and the
    hand-off is half full. Each side stores its own flag or counter, then
    reads the other's, both sequentially consistent: a writer about to
    sleep sees the new item, or the putter sees it sleeping and signals
    it under the lock, which the writer holds until it waits. The putter
    clears `sleeping` as it reads it, so of the puts made before the
    woken writer runs only the first takes the lock. A pacing writer's
    look at the bytes (s_half_full) reads put_seq first, sequentially
    consistent, and put_bytes after it: the bytes of every put it counts.

    Pacing. A pass that syncs costs some 400 us of CPU whatever it carries
    (fdatasync, the block I/O and its interrupts, in a virtual machine),
    against some 100 ns a message for the rest; back to back, passes last
    as long as a sync, a few ms, and carry few messages. So after a pass
    that synced, the next one starts FH_SPOOL_WRITER_PACE_NS after it, not
    at once, unless the hand-off is half full (items or bytes), a flush
    or a waiting put wants it, or the writer stops: a spilling consumer
    costs at most a few percent of a CPU in syncs, and its messages
    become readable at most that much later.
*/
#include "spool_writer.h"

#include "log.h"
#include "memory.h"
#include "oom.h"
#include "thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    void *item;
    uint32_t frame_count;
    uint64_t bytes;
} s_slot_t;

struct fh_spool_writer {
    fh_spool_t *spool;
    fh_spool_writer_ops_t ops;
    size_t max_items;
    uint64_t max_bytes;

    pthread_mutex_t lock;
    pthread_cond_t work;    /* the writer waits for items (or stop) */
    pthread_cond_t room;    /* put (wait) waits for room */
    pthread_cond_t settled; /* flush waits for fh_spool_writer_pending to reach 0 */
    /* Slot i holds item number i of those put, modulo ring_cap. ring and
       ring_cap change under lock, by the putter only (it reads them
       without). */
    s_slot_t *ring;
    size_t ring_cap;
    atomic_uint_fast64_t put_seq;     /* items put: the putter's */
    atomic_uint_fast64_t take_seq;    /* items taken: the writer's, under lock */
    atomic_uint_fast64_t put_bytes;   /* of the items put: the putter's */
    atomic_uint_fast64_t taken_bytes; /* of the items taken: the writer's, under lock */
    atomic_bool sleeping;             /* the writer waits for items */
    atomic_bool pacing;               /* the writer waits for the pace (or half full) */
    bool putter_waiting, stopping;    /* under lock */
    int flushing;                     /* flush calls waiting: no pacing */
    atomic_int_fast64_t pace_ns;

    atomic_uint_fast64_t settled_seq; /* items whose `written` returned: the writer's */
    atomic_uint_fast64_t passes;

    /* The writer's own. */
    s_slot_t *batch;
    fh_spool_entry_t *entries;
    size_t batch_cap;
    fanhub_bytes_t *frames;
    size_t frame_cap;
    fh_thread_t thread;
};

/* Items in the ring: exact for the putter, and for the writer under lock;
   from elsewhere a moment's value. */
static size_t
s_count (fh_spool_writer_t *self)
{
    /* Sequentially consistent: "Wake-ups" reads put_seq through it. */
    uint64_t taken = atomic_load (&self->take_seq);
    return (size_t) (atomic_load (&self->put_seq) - taken);
}

/* Bytes of the items in the ring, as s_count. Never negative: taken_bytes
   counts only items whose put the writer saw, put_bytes stored before. In
   s_half_full it is read after s_count (see "Wake-ups"). */
static uint64_t
s_ring_bytes (fh_spool_writer_t *self)
{
    uint64_t taken = atomic_load_explicit (&self->taken_bytes, memory_order_acquire);
    return atomic_load_explicit (&self->put_bytes, memory_order_acquire) - taken;
}

/* Sizes the frame scratch for `needed` frames. False when out of memory. */
static bool
s_frames_reserve (fh_spool_writer_t *self, size_t needed)
{
    if (needed <= self->frame_cap)
        return true;
    size_t cap = self->frame_cap ? self->frame_cap : 1024;
    while (cap < needed)
        cap *= 2;
    fanhub_bytes_t *frames = realloc (self->frames, cap * sizeof *frames);
    if (!frames) {
        fh_oom_note ("a spool write's frames; the pass fails, its messages counted lost");
        return false;
    }
    fh_memory_populate (frames + self->frame_cap, (cap - self->frame_cap) * sizeof *frames);
    self->frames = frames;
    self->frame_cap = cap;
    return true;
}

/* One pass: appends batch[0..n-1] as one group commit and reports each. */
static void
s_write_pass (fh_spool_writer_t *self, size_t n)
{
    size_t frames = 0;
    for (size_t i = 0; i < n; i++)
        frames += self->batch[i].frame_count;
    bool room = s_frames_reserve (self, frames);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        fh_spool_entry_t *entry = &self->entries[i];
        memset (entry, 0, sizeof *entry);
        if (!room) {
            entry->rc = -1;
            entry->error = ENOMEM;
            continue;
        }
        entry->frame_count = self->batch[i].frame_count;
        entry->frames = self->frames + at;
        at += entry->frame_count;
        self->ops.describe (self->ops.arg, self->batch[i].item, entry);
    }
    if (room) {
        fh_spool_append_batch (self->spool, self->entries, n);
        atomic_fetch_add (&self->passes, 1);
    }
    for (size_t i = 0; i < n; i++)
        self->ops.written (self->ops.arg, self->batch[i].item, self->entries[i].rc,
                           self->entries[i].error);
    /* After every `written`: a flush that returns sees them all done. */
    uint64_t settled = atomic_load_explicit (&self->settled_seq, memory_order_relaxed);
    atomic_store_explicit (&self->settled_seq, settled + n, memory_order_release);
    if (self->ops.wrote)
        self->ops.wrote (self->ops.arg);
}

/* Grows the writer's batch towards n items. Under lock (short: a copy). */
static void
s_batch_reserve (fh_spool_writer_t *self, size_t n)
{
    if (n <= self->batch_cap)
        return;
    size_t cap = self->batch_cap * 2 > n ? self->batch_cap * 2 : n;
    if (cap > self->max_items)
        cap = self->max_items;
    s_slot_t *batch = malloc (cap * sizeof *batch);
    fh_spool_entry_t *entries = malloc (cap * sizeof *entries);
    if (!batch || !entries) {
        fh_oom_note ("a spool writer's batch; it writes smaller batches");
        free (batch);
        free (entries);
        return;
    }
    fh_memory_populate (batch, cap * sizeof *batch); /* filled by the next pass */
    fh_memory_populate (entries, cap * sizeof *entries);
    free (self->batch);
    free (self->entries);
    self->batch = batch;
    self->entries = entries;
    self->batch_cap = cap;
}

static int64_t
s_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Half full (items or bytes), so a pass is due now. */
static bool
s_half_full (fh_spool_writer_t *self)
{
    return s_count (self) * 2 >= self->max_items
           || (self->max_bytes && s_ring_bytes (self) * 2 >= self->max_bytes);
}

/* Under lock: waits until the pace allows the next pass (next_ns) or
   something cannot wait for it. See "Pacing" and "Wake-ups". */
static void
s_pace (fh_spool_writer_t *self, int64_t next_ns)
{
    struct timespec until = {.tv_sec = next_ns / 1000000000, .tv_nsec = next_ns % 1000000000};
    atomic_store (&self->pacing, true);
    while (!self->stopping && !self->flushing && !self->putter_waiting && !s_half_full (self)
           && s_now_ns () < next_ns)
        if (pthread_cond_timedwait (&self->work, &self->lock, &until) == ETIMEDOUT)
            break;
    atomic_store (&self->pacing, false);
}

/* Under lock: waits for an item (or stop). See "Wake-ups". */
static void
s_sleep (fh_spool_writer_t *self)
{
    while (!self->stopping) {
        atomic_store (&self->sleeping, true);
        if (s_count (self) > 0)
            break;
        pthread_cond_wait (&self->work, &self->lock);
    }
    atomic_store (&self->sleeping, false);
}

static void *
s_writer_thread (void *arg)
{
    fh_spool_writer_t *self = arg;
    int64_t next_ns = 0; /* the earliest start of the next pass */
    pthread_mutex_lock (&self->lock);
    while (true) {
        if (s_count (self) == 0)
            s_sleep (self);
        if (next_ns)
            s_pace (self, next_ns);
        size_t n = s_count (self);
        if (n == 0)
            break; /* stopping, and everything is written */
        s_batch_reserve (self, n);
        if (n > self->batch_cap)
            n = self->batch_cap; /* out of memory: the rest in the next pass */
        uint64_t bytes = 0, taken = atomic_load (&self->take_seq);
        for (size_t i = 0; i < n; i++) {
            self->batch[i] = self->ring[(taken + i) % self->ring_cap];
            bytes += self->batch[i].bytes;
        }
        uint64_t taken_bytes = atomic_load_explicit (&self->taken_bytes, memory_order_relaxed);
        atomic_store_explicit (&self->taken_bytes, taken_bytes + bytes, memory_order_release);
        /* release: the putter may fill these slots again once it sees it. */
        atomic_store_explicit (&self->take_seq, taken + n, memory_order_release);
        if (self->putter_waiting)
            pthread_cond_broadcast (&self->room);
        pthread_mutex_unlock (&self->lock);

        int64_t start_ns = s_now_ns ();
        uint64_t syncs = fh_spool_syncs (self->spool);
        s_write_pass (self, n);
        int64_t pace = atomic_load (&self->pace_ns);
        next_ns = pace > 0 && fh_spool_syncs (self->spool) != syncs ? start_ns + pace : 0;

        pthread_mutex_lock (&self->lock);
        pthread_cond_broadcast (&self->settled);
    }
    pthread_mutex_unlock (&self->lock);
    return NULL;
}

fh_spool_writer_t *
fh_spool_writer_new (fh_spool_t *spool, size_t max_items, uint64_t max_bytes,
                     const fh_spool_writer_ops_t *ops, char *err, size_t errlen)
{
    fh_spool_writer_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "spool writer: out of memory");
        return NULL;
    }
    self->spool = spool;
    self->ops = *ops;
    self->max_items = max_items ? max_items : 1;
    self->max_bytes = max_bytes;
    pthread_mutex_init (&self->lock, NULL);
    pthread_condattr_t monotonic;
    pthread_condattr_init (&monotonic);
    pthread_condattr_setclock (&monotonic, CLOCK_MONOTONIC); /* s_pace */
    pthread_cond_init (&self->work, &monotonic);
    pthread_condattr_destroy (&monotonic);
    pthread_cond_init (&self->room, NULL);
    pthread_cond_init (&self->settled, NULL);
    atomic_init (&self->settled_seq, 0);
    atomic_init (&self->passes, 0);
    atomic_init (&self->pace_ns, FH_SPOOL_WRITER_PACE_NS);
    atomic_init (&self->put_seq, 0);
    atomic_init (&self->take_seq, 0);
    atomic_init (&self->put_bytes, 0);
    atomic_init (&self->taken_bytes, 0);
    atomic_init (&self->sleeping, false);
    atomic_init (&self->pacing, false);
    size_t first = self->max_items < 64 ? self->max_items : 64;
    self->ring_cap = first;
    self->batch_cap = first;
    self->ring = malloc (first * sizeof *self->ring);
    self->batch = malloc (first * sizeof *self->batch);
    self->entries = malloc (first * sizeof *self->entries);
    if (!self->ring || !self->batch || !self->entries) {
        snprintf (err, errlen, "spool writer: out of memory");
        fh_spool_writer_destroy (&self);
        return NULL;
    }
    if (fh_thread_start (&self->thread, "fh:spool-writer", s_writer_thread, self, err, errlen) != 0)
        fh_spool_writer_destroy (&self);
    return self;
}

void
fh_spool_writer_destroy (fh_spool_writer_t **self_p)
{
    fh_spool_writer_t *self = *self_p;
    if (!self)
        return;
    if (fh_thread_started (&self->thread)) {
        pthread_mutex_lock (&self->lock);
        self->stopping = true;
        pthread_cond_signal (&self->work);
        pthread_mutex_unlock (&self->lock);
        fh_thread_join (&self->thread);
    }
    pthread_mutex_destroy (&self->lock);
    pthread_cond_destroy (&self->work);
    pthread_cond_destroy (&self->room);
    pthread_cond_destroy (&self->settled);
    free (self->ring);
    free (self->batch);
    free (self->entries);
    free (self->frames);
    free (self);
    *self_p = NULL;
}

/* The putter: within the bounds (items and bytes)? */
static bool
s_within (fh_spool_writer_t *self, uint64_t bytes)
{
    size_t count = s_count (self);
    if (count == self->max_items)
        return false;
    return count == 0 || !self->max_bytes || s_ring_bytes (self) + bytes <= self->max_bytes;
}

/* The putter, under lock: within the bounds, with a free slot (the ring
   doubled if it had none). False when out of the bounds, or out of
   memory. */
static bool
s_has_room (fh_spool_writer_t *self, uint64_t bytes)
{
    if (!s_within (self, bytes))
        return false;
    if (s_count (self) < self->ring_cap)
        return true;
    size_t cap = self->ring_cap;
    size_t grown = cap * 2 < self->max_items ? cap * 2 : self->max_items;
    s_slot_t *ring = malloc (grown * sizeof *ring);
    if (!ring) {
        fh_oom_note ("a spool hand-off could not grow; it counts as full (spill waits)");
        return false;
    }
    fh_memory_populate (ring, grown * sizeof *ring);
    /* Under lock the writer takes nothing: the slots stay put. */
    uint64_t taken = atomic_load (&self->take_seq), put = atomic_load (&self->put_seq);
    for (uint64_t i = taken; i < put; i++)
        ring[i % grown] = self->ring[i % cap];
    free (self->ring);
    self->ring = ring;
    self->ring_cap = grown;
    return true;
}

bool
fh_spool_writer_room (fh_spool_writer_t *self, uint64_t bytes)
{
    if (s_within (self, bytes) && s_count (self) < self->ring_cap)
        return true; /* the writer only makes room: still true at the put */
    pthread_mutex_lock (&self->lock);
    bool room = s_has_room (self, bytes);
    pthread_mutex_unlock (&self->lock);
    return room;
}

int
fh_spool_writer_put (fh_spool_writer_t *self, void *item, uint32_t frame_count, uint64_t bytes,
                     bool wait)
{
    if (!s_within (self, bytes) || s_count (self) == self->ring_cap) {
        /* Slow: the ring doubles, or the putter waits, under the lock. */
        pthread_mutex_lock (&self->lock);
        while (!s_has_room (self, bytes)) {
            if (!wait) {
                pthread_mutex_unlock (&self->lock);
                return -1;
            }
            self->putter_waiting = true;
            if (atomic_load (&self->pacing))
                pthread_cond_signal (&self->work);
            pthread_cond_wait (&self->room, &self->lock);
            self->putter_waiting = false;
        }
        pthread_mutex_unlock (&self->lock);
    }
    uint64_t put = atomic_load_explicit (&self->put_seq, memory_order_relaxed);
    self->ring[put % self->ring_cap] = (s_slot_t){item, frame_count, bytes};
    uint64_t put_bytes = atomic_load_explicit (&self->put_bytes, memory_order_relaxed);
    atomic_store_explicit (&self->put_bytes, put_bytes + bytes, memory_order_relaxed);
    /* seq_cst, then the writer's flags: see "Wake-ups". */
    atomic_store (&self->put_seq, put + 1);
    if (atomic_exchange (&self->sleeping, false)
        || (atomic_load (&self->pacing) && s_half_full (self))) {
        pthread_mutex_lock (&self->lock);
        pthread_cond_signal (&self->work);
        pthread_mutex_unlock (&self->lock);
    }
    return 0;
}

uint64_t
fh_spool_writer_pending (fh_spool_writer_t *self)
{
    /* settled first: it never passes put_seq, so the difference is >= 0. */
    uint64_t settled = atomic_load_explicit (&self->settled_seq, memory_order_acquire);
    return atomic_load (&self->put_seq) - settled;
}

void
fh_spool_writer_flush (fh_spool_writer_t *self)
{
    pthread_mutex_lock (&self->lock);
    self->flushing++;
    if (atomic_load (&self->pacing))
        pthread_cond_signal (&self->work);
    while (fh_spool_writer_pending (self) > 0)
        pthread_cond_wait (&self->settled, &self->lock);
    self->flushing--;
    pthread_mutex_unlock (&self->lock);
}

uint64_t
fh_spool_writer_passes (fh_spool_writer_t *self)
{
    return atomic_load (&self->passes);
}

void
fh_spool_writer_set_pace (fh_spool_writer_t *self, int64_t pace_ns)
{
    atomic_store (&self->pace_ns, pace_ns);
}
