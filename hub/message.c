/*  message - one bus message as the hub holds it. See message.h.

    The cache of released messages: per size class (room for 2 and for 3
    frames, nearly every bus message), a lock-free stack that any releasing thread pushes
    onto, and a private list of the allocating thread, refilled by taking
    the whole stack in one exchange. Taking it all at once is what makes
    the stack safe without ABA counters: nothing is ever popped singly. The
    stack stops taking messages at CACHE_MAX (counted loosely), so a drained
    backlog goes back to malloc.

    Deferrals (one per spilled message, alive until its copy is read back
    and done) come from blocks of a few hundred KiB whose pages are
    populated in one call when the block is made: a held consumer that
    spills 100,000 messages would otherwise take a page fault every 85
    deferrals, and a page fault in a virtual machine costs as much as
    spilling tens of messages (issue 12, docs/performance.md). A block
    counts its deferrals not yet released, every one of them from the
    start, plus the hold of the thread that carves from it, so carving
    is no atomic operation; a carver that lets go of a block early gives
    back the ones it did not carve. The last release puts it on a short
    list of spare blocks (or frees it), whose pages are warm.
*/
#include "message.h"

#include "clock.h"
#include "emit.h"
#include "memory.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_CLASSES 2 /* messages of 2 and of 3 frames */
#define CACHE_MAX 16384 /* released messages kept per class */

static _Atomic (fh_msg_t *) s_released[CACHE_CLASSES];
static atomic_size_t s_released_count[CACHE_CLASSES];
static _Thread_local fh_msg_t *s_private[CACHE_CLASSES];

/* Deferral blocks: aligned to their size, so a deferral finds its block
   by masking its address. */
#define BLOCK_BYTES ((size_t) 256 * 1024)
#define BLOCK_SPARE 8 /* blocks kept for reuse (2 MiB) */

typedef struct s_block {
    atomic_size_t alive;  /* deferrals not carved or not released, plus
                              the carver's hold */
    size_t carved;        /* deferrals handed out (the carving thread's) */
    struct s_block *next; /* on the spare list */
    _Alignas(fh_deferral_t) unsigned char first[];
} s_block_t;

#define BLOCK_DEFERRALS ((BLOCK_BYTES - sizeof (s_block_t)) / sizeof (fh_deferral_t))

static _Thread_local s_block_t *s_carving; /* this thread's block, or NULL */
static pthread_mutex_t s_spare_lock = PTHREAD_MUTEX_INITIALIZER;
static s_block_t *s_spare;
static size_t s_spare_count;

static inline int
s_class (uint32_t room)
{
    return room >= 2 && room < 2 + CACHE_CLASSES ? (int) room - 2 : -1;
}

static size_t
s_size (uint32_t count)
{
    return sizeof (fh_msg_t) + count * sizeof (zmq_msg_t);
}

fh_msg_t *
fh_msg_new (zmq_msg_t *frames, uint32_t count, uint64_t seq, int64_t received_ns)
{
    fh_msg_t *self = malloc (s_size (count));
    if (!self)
        return NULL;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < count; i++) {
        bytes += zmq_msg_size (&frames[i]);
        zmq_msg_init (&self->frames[i]);
        zmq_msg_move (&self->frames[i], &frames[i]);
    }
    self->cached = false;
    self->room = count;
    return fh_msg_fill (self, count, bytes, seq, received_ns);
}

fh_msg_t *
fh_msg_shell (uint32_t room)
{
    int class = s_class (room);
    fh_msg_t *self = class < 0 ? NULL : s_private[class];
    if (class >= 0 && !self && atomic_load_explicit (&s_released[class], memory_order_relaxed)) {
        /* acquire: the releasers' writes of next_free are visible. */
        self = atomic_exchange_explicit (&s_released[class], NULL, memory_order_acquire);
        atomic_store_explicit (&s_released_count[class], 0, memory_order_relaxed);
    }
    if (self)
        s_private[class] = self->next_free;
    else if (!(self = malloc (s_size (room))))
        return NULL;
    self->cached = class >= 0;
    self->room = room;
    return self;
}

void
fh_msg_shell_put (fh_msg_t *self)
{
    if (!self->cached) {
        free (self);
        return;
    }
    int class = s_class (self->room);
    self->next_free = s_private[class];
    s_private[class] = self;
}

/* Back to the cache when it has room; false when the caller frees it. */
static bool
s_cache_put (fh_msg_t *self)
{
    int class = s_class (self->room);
    if (class < 0
        || atomic_fetch_add_explicit (&s_released_count[class], 1, memory_order_relaxed)
               >= CACHE_MAX)
        return false;
    fh_msg_t *top = atomic_load_explicit (&s_released[class], memory_order_relaxed);
    do
        self->next_free = top;
    while (!atomic_compare_exchange_weak_explicit (&s_released[class], &top, self,
                                                   memory_order_release, memory_order_relaxed));
    return true;
}

static void
s_free_list (fh_msg_t *list)
{
    while (list) {
        fh_msg_t *next = list->next_free;
        free (list);
        list = next;
    }
}

/* Drops `holds` holds on block; the last goes to the spare list, or is
   freed when that is full. */
static void
s_block_release (s_block_t *block, size_t holds)
{
    if (atomic_fetch_sub_explicit (&block->alive, holds, memory_order_acq_rel) != holds)
        return;
    pthread_mutex_lock (&s_spare_lock);
    if (s_spare_count < BLOCK_SPARE) {
        block->next = s_spare;
        s_spare = block;
        s_spare_count++;
        block = NULL;
    }
    pthread_mutex_unlock (&s_spare_lock);
    free (block);
}

/* A block to carve from: a spare one, or a new one with its pages
   populated (MADV_POPULATE_WRITE; where the kernel lacks it, they fault
   in as used). NULL when out of memory. */
static s_block_t *
s_block_take (void)
{
    pthread_mutex_lock (&s_spare_lock);
    s_block_t *block = s_spare;
    if (block) {
        s_spare = block->next;
        s_spare_count--;
    }
    pthread_mutex_unlock (&s_spare_lock);
    if (!block) {
        void *memory = NULL;
        if (posix_memalign (&memory, BLOCK_BYTES, BLOCK_BYTES) != 0)
            return NULL;
        fh_memory_populate (memory, BLOCK_BYTES);
        block = memory;
    }
    atomic_init (&block->alive, BLOCK_DEFERRALS + 1); /* see the top of the file */
    block->carved = 0;
    block->next = NULL;
    return block;
}

static fh_deferral_t *
s_deferral_new (void)
{
    s_block_t *block = s_carving;
    if (!block || block->carved == BLOCK_DEFERRALS) {
        s_block_t *fresh = s_block_take ();
        if (!fresh)
            return NULL;
        if (block)
            s_block_release (block, 1); /* the carver's hold */
        s_carving = block = fresh;
    }
    return (fh_deferral_t *) block->first + block->carved++;
}

static void
s_deferral_free (fh_deferral_t *deferral)
{
    s_block_release ((s_block_t *) ((uintptr_t) deferral & ~(uintptr_t) (BLOCK_BYTES - 1)), 1);
}

void
fh_msg_cache_drain (void)
{
    if (s_carving) {
        /* The carver's hold, and the deferrals it will not carve. */
        s_block_release (s_carving, 1 + BLOCK_DEFERRALS - s_carving->carved);
        s_carving = NULL;
    }
    pthread_mutex_lock (&s_spare_lock);
    s_block_t *spare = s_spare;
    s_spare = NULL;
    s_spare_count = 0;
    pthread_mutex_unlock (&s_spare_lock);
    while (spare) {
        s_block_t *next = spare->next;
        free (spare);
        spare = next;
    }
    for (int class = 0; class < CACHE_CLASSES; class ++) {
        s_free_list (s_private[class]);
        s_private[class] = NULL;
        s_free_list (atomic_exchange_explicit (&s_released[class], NULL, memory_order_acquire));
        atomic_store_explicit (&s_released_count[class], 0, memory_order_relaxed);
    }
}

void
fh_msg_destroy (fh_msg_t **self_p)
{
    fh_msg_t *self = *self_p;
    if (!self)
        return;
    for (uint32_t i = 0; i < self->frame_count; i++)
        zmq_msg_close (&self->frames[i]);
    if (!self->cached || !s_cache_put (self))
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
    fh_msg_release_at (self, handled, 0);
}

int
fh_msg_defer (fh_msg_t *self)
{
    if (!self->deferral) {
        fh_deferral_t *deferral = s_deferral_new ();
        if (!deferral)
            return -1;
        atomic_init (&deferral->refs, 2); /* the original's, and this copy's */
        /* The waiter is shared, not moved: other consumers may be setting
           their outcomes through self->emit right now. */
        deferral->emit = self->emit;
        deferral->received_ns = self->received_ns;
        self->deferral = deferral;
        return 0;
    }
    atomic_fetch_add_explicit (&self->deferral->refs, 1, memory_order_relaxed);
    return 0;
}

/* One message handled: its end-to-end latency (now_ns 0: read the clock)
   and the count, written by the last holder only. */
static inline void
s_count_handled (fh_handled_t *handled, int64_t received_ns, int64_t now_ns)
{
    if (!now_ns)
        now_ns = fh_clock_mono_ns ();
    fh_histogram_record (&handled->end_to_end, now_ns - received_ns);
    atomic_store_explicit (&handled->handled,
                           atomic_load_explicit (&handled->handled, memory_order_relaxed) + 1,
                           memory_order_release);
}

void
fh_deferral_release (fh_deferral_t *self, fh_handled_t *handled, int64_t now_ns)
{
    if (atomic_fetch_sub_explicit (&self->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (handled)
        s_count_handled (handled, self->received_ns, now_ns);
    if (self->emit)
        fh_emit_handled (self->emit);
    s_deferral_free (self);
}

void
fh_msg_release_at (fh_msg_t *self, fh_handled_t *handled, int64_t now_ns)
{
    /* acq_rel: the freeing thread must see every other holder's reads done. */
    if (atomic_fetch_sub_explicit (&self->holders, 1, memory_order_acq_rel) != 1)
        return;
    if (self->deferral) {
        /* Handled once the spooled copies are done too: the deferral
           tells the waiter then. */
        fh_deferral_release (self->deferral, handled, now_ns);
        fh_msg_destroy (&self);
        return;
    }
    if (handled && !self->from_spool)
        s_count_handled (handled, self->received_ns, now_ns);
    if (self->emit)
        fh_emit_handled (self->emit);
    fh_msg_destroy (&self);
}
