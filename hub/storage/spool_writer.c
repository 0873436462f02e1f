/*  spool_writer - a spool's appender on a thread of its own. See
    spool_writer.h.

    The hand-off is a ring of (item, frame count, bytes) under one mutex.
    The writer moves the whole ring into its own batch under the lock (a
    copy of a few words per item), then describes, writes and reports
    outside it, so a put waits at most for that copy, never for the disk.
    The ring and the batch start small and double as needed, up to
    max_items: a consumer that never spills costs a few KiB, not its bound.

    Pacing. A pass that syncs costs some 400 us of CPU whatever it carries
    (fdatasync, the block I/O and its interrupts, in a virtual machine),
    against some 100 ns a message for the rest; back to back, passes last
    as long as a sync, a few ms, and carry few messages. So after a pass
    that synced, the next one starts FH_SPOOL_WRITER_PACE_NS after it, not
    at once, unless the hand-off is half full (items or bytes), a flush
    or a waiting put wants it, or the writer stops: a spilling consumer
    costs at most a few percent of a CPU in syncs, and its messages
    become readable at most that much later. Puts wake a pacing writer
    only when the hand-off reaches half full.
*/
#include "spool_writer.h"

#include "log.h"
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
    pthread_cond_t settled; /* flush waits for pending to reach 0 */
    s_slot_t *ring;         /* ring_cap slots */
    size_t head;
    atomic_size_t ring_cap; /* changed under lock, read without it */
    /* Changed under lock; read without it by fh_spool_writer_room: the
       writer only lowers them, so a stale reading errs towards "full". */
    atomic_size_t count;
    atomic_uint_fast64_t bytes; /* of the items in the ring */
    bool writer_waiting, putter_waiting, stopping;
    bool pacing;     /* the writer waits for the pace (or half full) */
    int flushing;    /* flush calls waiting: no pacing */
    atomic_int_fast64_t pace_ns;

    atomic_uint_fast64_t pending; /* put, and `written` not yet returned */
    atomic_uint_fast64_t passes;

    /* The writer's own. */
    s_slot_t *batch;
    fh_spool_entry_t *entries;
    size_t batch_cap;
    fanhub_bytes_t *frames;
    size_t frame_cap;
    fh_thread_t thread;
};

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
    if (!frames)
        return false;
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
    atomic_fetch_sub (&self->pending, n);
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
        free (batch);
        free (entries);
        return;
    }
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

/* Under lock: half full (items or bytes), so a pass is due now. */
static bool
s_half_full (fh_spool_writer_t *self)
{
    return atomic_load (&self->count) * 2 >= self->max_items
           || (self->max_bytes && atomic_load (&self->bytes) * 2 >= self->max_bytes);
}

/* Under lock: waits until the pace allows the next pass (next_ns) or
   something cannot wait for it. See "Pacing". */
static void
s_pace (fh_spool_writer_t *self, int64_t next_ns)
{
    struct timespec until = {.tv_sec = next_ns / 1000000000, .tv_nsec = next_ns % 1000000000};
    self->pacing = true;
    while (!self->stopping && !self->flushing && !self->putter_waiting && !s_half_full (self)
           && s_now_ns () < next_ns)
        if (pthread_cond_timedwait (&self->work, &self->lock, &until) == ETIMEDOUT)
            break;
    self->pacing = false;
}

static void *
s_writer_thread (void *arg)
{
    fh_spool_writer_t *self = arg;
    int64_t next_ns = 0; /* the earliest start of the next pass */
    pthread_mutex_lock (&self->lock);
    while (true) {
        while (atomic_load (&self->count) == 0 && !self->stopping) {
            self->writer_waiting = true;
            pthread_cond_wait (&self->work, &self->lock);
            self->writer_waiting = false;
        }
        if (next_ns)
            s_pace (self, next_ns);
        size_t n = atomic_load (&self->count);
        if (n == 0)
            break; /* stopping, and everything is written */
        s_batch_reserve (self, n);
        if (n > self->batch_cap)
            n = self->batch_cap; /* out of memory: the rest in the next pass */
        uint64_t bytes = 0;
        size_t cap = atomic_load (&self->ring_cap);
        for (size_t i = 0; i < n; i++) {
            self->batch[i] = self->ring[(self->head + i) % cap];
            bytes += self->batch[i].bytes;
        }
        self->head = (self->head + n) % cap;
        atomic_store (&self->count, atomic_load (&self->count) - n);
        atomic_store (&self->bytes, atomic_load (&self->bytes) - bytes);
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
    atomic_init (&self->pending, 0);
    atomic_init (&self->passes, 0);
    atomic_init (&self->pace_ns, FH_SPOOL_WRITER_PACE_NS);
    atomic_init (&self->count, 0);
    atomic_init (&self->bytes, 0);
    size_t first = self->max_items < 64 ? self->max_items : 64;
    atomic_init (&self->ring_cap, first);
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

/* Within the bounds (items and bytes)? */
static bool
s_within (fh_spool_writer_t *self, uint64_t bytes)
{
    size_t count = atomic_load (&self->count);
    if (count == self->max_items)
        return false;
    return count == 0 || !self->max_bytes || atomic_load (&self->bytes) + bytes <= self->max_bytes;
}

/* Under lock: within the bounds, with a free slot (the ring doubled if
   it had none). False when out of the bounds, or out of memory. */
static bool
s_has_room (fh_spool_writer_t *self, uint64_t bytes)
{
    if (!s_within (self, bytes))
        return false;
    size_t count = atomic_load (&self->count), cap = atomic_load (&self->ring_cap);
    if (count < cap)
        return true;
    size_t grown = cap * 2 < self->max_items ? cap * 2 : self->max_items;
    s_slot_t *ring = malloc (grown * sizeof *ring);
    if (!ring)
        return false;
    for (size_t i = 0; i < count; i++)
        ring[i] = self->ring[(self->head + i) % cap];
    free (self->ring);
    self->ring = ring;
    self->head = 0;
    atomic_store (&self->ring_cap, grown);
    return true;
}

bool
fh_spool_writer_room (fh_spool_writer_t *self, uint64_t bytes)
{
    /* Without the lock when a slot is free: see `count`. */
    if (s_within (self, bytes) && atomic_load (&self->count) < atomic_load (&self->ring_cap))
        return true;
    pthread_mutex_lock (&self->lock);
    bool room = s_has_room (self, bytes);
    pthread_mutex_unlock (&self->lock);
    return room;
}

int
fh_spool_writer_put (fh_spool_writer_t *self, void *item, uint32_t frame_count,
                     uint64_t bytes, bool wait)
{
    pthread_mutex_lock (&self->lock);
    while (!s_has_room (self, bytes)) {
        if (!wait) {
            pthread_mutex_unlock (&self->lock);
            return -1;
        }
        self->putter_waiting = true;
        if (self->pacing)
            pthread_cond_signal (&self->work);
        pthread_cond_wait (&self->room, &self->lock);
        self->putter_waiting = false;
    }
    size_t count = atomic_load (&self->count);
    self->ring[(self->head + count) % atomic_load (&self->ring_cap)] =
        (s_slot_t){item, frame_count, bytes};
    atomic_store (&self->count, count + 1);
    atomic_store (&self->bytes, atomic_load (&self->bytes) + bytes);
    atomic_fetch_add (&self->pending, 1);
    if (self->writer_waiting || (self->pacing && s_half_full (self)))
        pthread_cond_signal (&self->work);
    pthread_mutex_unlock (&self->lock);
    return 0;
}

uint64_t
fh_spool_writer_pending (fh_spool_writer_t *self)
{
    return atomic_load (&self->pending);
}

void
fh_spool_writer_flush (fh_spool_writer_t *self)
{
    pthread_mutex_lock (&self->lock);
    self->flushing++;
    if (self->pacing)
        pthread_cond_signal (&self->work);
    while (atomic_load (&self->pending) > 0)
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
