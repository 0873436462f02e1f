/*  pending - open asynchronous messages of one consumer. See pending.h.

    Entries live in one array of `capacity`; a ticket is the entry's index
    plus one in its low INDEX_BITS and a serial number above, so looking a
    ticket up is an index and one comparison. Done entries wait in a FIFO
    of indices, so completions are finished in the order they came.

    The counts a worker asks before each message are mirrored in atomics,
    stored under the lock and read without it: a stale read errs on the
    safe side (fuller, or a completion not seen yet, whose wake-up follows).
*/
#include "pending.h"

#include "fanhub/sdk.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define INDEX_BITS 20
#define INDEX_MASK ((UINT64_C (1) << INDEX_BITS) - 1)

typedef enum { S_FREE, S_RESERVED, S_OPEN, S_DONE } s_state_t;

typedef struct {
    fh_pending_item_t item;
    fanhub_ticket_t ticket;
    s_state_t state;
    int64_t clock_ns; /* consume_timeout counts from here: the attempt's
                         start, or fh_pending_started's call */
} s_entry_t;

struct fh_pending {
    pthread_mutex_t lock;
    pthread_cond_t done_cond; /* CLOCK_MONOTONIC */
    size_t capacity, used;
    size_t window;     /* the plugin's (set_window), <= capacity */
    bool self_clocked; /* set_window was called: the plugin starts each
                          entry's clock (fh_pending_started) */
    s_entry_t *entries;
    size_t *free_list; /* a stack of free indices */
    size_t free_count;
    size_t *done; /* a FIFO of done indices */
    size_t done_head, done_count;
    uint64_t serial;
    fh_pending_wake_fn *wake;
    void *wake_arg;
    /* used, done_count and window as of the last change (s_publish). */
    atomic_size_t used_seen, done_seen, window_seen;
    atomic_size_t claims; /* fh_pending_claim's, not yet taken over */
};

/* Under lock, after a change: the counts for the readers without it. */
static void
s_publish (fh_pending_t *self)
{
    atomic_store (&self->used_seen, self->used);
    atomic_store (&self->done_seen, self->done_count);
    atomic_store (&self->window_seen, self->window);
}

fh_pending_t *
fh_pending_new (size_t capacity, fh_pending_wake_fn *wake, void *wake_arg)
{
    assert (capacity >= 1 && capacity < INDEX_MASK);
    fh_pending_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->entries = calloc (capacity, sizeof *self->entries);
    self->free_list = calloc (capacity, sizeof *self->free_list);
    self->done = calloc (capacity, sizeof *self->done);
    if (!self->entries || !self->free_list || !self->done) {
        free (self->entries);
        free (self->free_list);
        free (self->done);
        free (self);
        return NULL;
    }
    pthread_mutex_init (&self->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init (&attr);
    pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
    pthread_cond_init (&self->done_cond, &attr);
    pthread_condattr_destroy (&attr);
    self->capacity = capacity;
    self->window = capacity;
    for (size_t i = 0; i < capacity; i++)
        self->free_list[i] = capacity - 1 - i; /* index 0 is taken first */
    self->free_count = capacity;
    self->wake = wake;
    self->wake_arg = wake_arg;
    atomic_init (&self->used_seen, 0);
    atomic_init (&self->done_seen, 0);
    atomic_init (&self->window_seen, capacity);
    atomic_init (&self->claims, 0);
    return self;
}

void
fh_pending_destroy (fh_pending_t **self_p, void (*release) (fh_msg_t *msg, void *arg), void *arg)
{
    fh_pending_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; i < self->capacity; i++) {
        if (self->entries[i].state != S_FREE && release)
            release (self->entries[i].item.msg, arg);
        free (self->entries[i].item.reason);
    }
    pthread_mutex_destroy (&self->lock);
    pthread_cond_destroy (&self->done_cond);
    free (self->entries);
    free (self->free_list);
    free (self->done);
    free (self);
    *self_p = NULL;
}

/* The entry of ticket, or NULL. Under lock. */
static s_entry_t *
s_find (fh_pending_t *self, fanhub_ticket_t ticket)
{
    uint64_t index = (ticket & INDEX_MASK);
    if (index == 0 || index > self->capacity)
        return NULL;
    s_entry_t *entry = &self->entries[index - 1];
    return entry->state != S_FREE && entry->ticket == ticket ? entry : NULL;
}

static void
s_free (fh_pending_t *self, s_entry_t *entry)
{
    free (entry->item.reason);
    entry->item.reason = NULL;
    entry->state = S_FREE;
    entry->ticket = 0;
    self->free_list[self->free_count++] = (size_t) (entry - self->entries);
    self->used--;
}

fanhub_ticket_t
fh_pending_reserve (fh_pending_t *self, const fh_pending_item_t *item, bool claimed)
{
    pthread_mutex_lock (&self->lock);
    if (self->free_count == 0) {
        pthread_mutex_unlock (&self->lock);
        return 0;
    }
    size_t index = self->free_list[--self->free_count];
    s_entry_t *entry = &self->entries[index];
    entry->item = *item;
    entry->item.reason = NULL;
    entry->clock_ns = self->self_clocked ? INT64_MAX : item->started_ns;
    entry->state = S_RESERVED;
    entry->ticket = (++self->serial << INDEX_BITS) | (uint64_t) (index + 1);
    self->used++;
    s_publish (self);
    /* used grew first: fh_pending_full never misses the place. */
    if (claimed)
        atomic_fetch_sub (&self->claims, 1);
    fanhub_ticket_t ticket = entry->ticket;
    pthread_mutex_unlock (&self->lock);
    return ticket;
}

void
fh_pending_claim (fh_pending_t *self)
{
    atomic_fetch_add (&self->claims, 1);
}

void
fh_pending_unclaim (fh_pending_t *self)
{
    atomic_fetch_sub (&self->claims, 1);
}

void
fh_pending_hold (fh_pending_t *self, fanhub_ticket_t ticket)
{
    pthread_mutex_lock (&self->lock);
    s_entry_t *entry = s_find (self, ticket);
    if (entry && entry->state == S_RESERVED)
        entry->state = S_OPEN;
    pthread_mutex_unlock (&self->lock);
}

bool
fh_pending_cancel (fh_pending_t *self, fanhub_ticket_t ticket)
{
    bool completed = false;
    pthread_mutex_lock (&self->lock);
    s_entry_t *entry = s_find (self, ticket);
    if (entry) {
        if (entry->state == S_DONE) {
            /* Take it back out of the done FIFO. */
            completed = true;
            size_t index = (size_t) (entry - self->entries);
            for (size_t i = 0; i < self->done_count; i++) {
                size_t at = (self->done_head + i) % self->capacity;
                if (self->done[at] != index)
                    continue;
                for (size_t j = i; j + 1 < self->done_count; j++)
                    self->done[(self->done_head + j) % self->capacity]
                        = self->done[(self->done_head + j + 1) % self->capacity];
                self->done_count--;
                break;
            }
        }
        s_free (self, entry);
        s_publish (self);
    }
    pthread_mutex_unlock (&self->lock);
    return completed;
}

int
fh_pending_complete (fh_pending_t *self, fanhub_ticket_t ticket, fanhub_result_t result)
{
    return fh_pending_complete_reason (self, ticket, result, NULL);
}

int
fh_pending_complete_reason (fh_pending_t *self, fanhub_ticket_t ticket, fanhub_result_t result,
                            const char *reason)
{
    char *copy = NULL;
    if (reason && reason[0] && result != FANHUB_OK) {
        size_t size = strcspn (reason, "\r\n");                       /* one line */
        copy = strndup (reason, fanhub_utf8_cut (reason, size, 255)); /* whole characters */
        if (!copy)
            return -1;
    }
    pthread_mutex_lock (&self->lock);
    s_entry_t *entry = s_find (self, ticket);
    if (!entry || entry->state == S_DONE) {
        pthread_mutex_unlock (&self->lock);
        free (copy);
        return -1;
    }
    entry->item.result = result;
    free (entry->item.reason);
    entry->item.reason = copy;
    entry->state = S_DONE;
    self->done[(self->done_head + self->done_count) % self->capacity]
        = (size_t) (entry - self->entries);
    self->done_count++;
    s_publish (self);
    pthread_cond_broadcast (&self->done_cond);
    pthread_mutex_unlock (&self->lock);
    if (self->wake)
        self->wake (self->wake_arg);
    return 0;
}

bool
fh_pending_take_done (fh_pending_t *self, fh_pending_item_t *out)
{
    pthread_mutex_lock (&self->lock);
    if (self->done_count == 0) {
        pthread_mutex_unlock (&self->lock);
        return false;
    }
    s_entry_t *entry = &self->entries[self->done[self->done_head]];
    self->done_head = (self->done_head + 1) % self->capacity;
    self->done_count--;
    *out = entry->item;
    entry->item.reason = NULL; /* the taker's now */
    s_free (self, entry);
    s_publish (self);
    pthread_mutex_unlock (&self->lock);
    return true;
}

size_t
fh_pending_count (fh_pending_t *self)
{
    return atomic_load (&self->used_seen);
}

bool
fh_pending_full (fh_pending_t *self)
{
    /* Claims first: a reservation raises used before it drops its claim. */
    size_t claims = atomic_load (&self->claims);
    return atomic_load (&self->used_seen) + claims >= atomic_load (&self->window_seen);
}

void
fh_pending_set_window (fh_pending_t *self, size_t window)
{
    pthread_mutex_lock (&self->lock);
    self->window = window == 0 || window > self->capacity ? self->capacity : window;
    self->self_clocked = window != 0;
    s_publish (self);
    pthread_mutex_unlock (&self->lock);
}

size_t
fh_pending_window (fh_pending_t *self)
{
    pthread_mutex_lock (&self->lock);
    size_t window = self->window;
    pthread_mutex_unlock (&self->lock);
    return window;
}

void
fh_pending_started (fh_pending_t *self, fanhub_ticket_t ticket, int64_t now_ns)
{
    pthread_mutex_lock (&self->lock);
    s_entry_t *entry = s_find (self, ticket);
    if (entry && (entry->state == S_OPEN || entry->state == S_RESERVED))
        entry->clock_ns = now_ns;
    pthread_mutex_unlock (&self->lock);
}

size_t
fh_pending_done_count (fh_pending_t *self)
{
    return atomic_load (&self->done_seen);
}

bool
fh_pending_wait (fh_pending_t *self, int64_t deadline_ns)
{
    struct timespec until
        = {(time_t) (deadline_ns / 1000000000), (long) (deadline_ns % 1000000000)};
    pthread_mutex_lock (&self->lock);
    int rc = 0;
    while (self->done_count == 0 && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait (&self->done_cond, &self->lock, &until);
    bool done = self->done_count > 0;
    pthread_mutex_unlock (&self->lock);
    return done;
}

/* The open entries started before before_ns: counted, the oldest's seq
   into *oldest_seq (may be NULL); with expire, each answered RETRY as
   expired and moved to the done list. Under self->lock. */
static size_t
s_overdue (fh_pending_t *self, int64_t before_ns, uint64_t *oldest_seq, bool expire)
{
    size_t count = 0;
    int64_t oldest = INT64_MAX;
    /* Every consumer is looked at once a tick: with 1,000 consumers that
       complete at once, scanning their empty tables was most of a tick. */
    if (self->used == 0)
        return 0;
    for (size_t i = 0; i < self->capacity; i++) {
        s_entry_t *entry = &self->entries[i];
        if (entry->state != S_OPEN || entry->clock_ns >= before_ns)
            continue;
        count++;
        if (entry->clock_ns < oldest) {
            oldest = entry->clock_ns;
            if (oldest_seq)
                *oldest_seq = entry->item.msg->seq;
        }
        if (!expire)
            continue;
        entry->item.result = FANHUB_RETRY;
        entry->item.expired = true;
        entry->state = S_DONE;
        /* A new serial: the plugin's ticket no longer names it. */
        entry->ticket = (++self->serial << INDEX_BITS) | (uint64_t) (i + 1);
        self->done[(self->done_head + self->done_count) % self->capacity] = i;
        self->done_count++;
    }
    return count;
}

size_t
fh_pending_older_than (fh_pending_t *self, int64_t before_ns, uint64_t *oldest_seq)
{
    pthread_mutex_lock (&self->lock);
    size_t count = s_overdue (self, before_ns, oldest_seq, false);
    pthread_mutex_unlock (&self->lock);
    return count;
}

size_t
fh_pending_expire (fh_pending_t *self, int64_t before_ns, uint64_t *oldest_seq)
{
    pthread_mutex_lock (&self->lock);
    size_t count = s_overdue (self, before_ns, oldest_seq, true);
    if (count) {
        s_publish (self);
        pthread_cond_broadcast (&self->done_cond);
    }
    pthread_mutex_unlock (&self->lock);
    if (count && self->wake)
        self->wake (self->wake_arg);
    return count;
}

bool
fh_pending_take_open (fh_pending_t *self, fh_pending_item_t *out)
{
    bool took = false;
    pthread_mutex_lock (&self->lock);
    for (size_t i = 0; i < self->capacity && !took; i++) {
        s_entry_t *entry = &self->entries[i];
        if (entry->state != S_OPEN)
            continue;
        *out = entry->item;
        s_free (self, entry);
        s_publish (self);
        took = true;
    }
    pthread_mutex_unlock (&self->lock);
    return took;
}
