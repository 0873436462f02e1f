/*  keyed - the per-key scheduler of a consumer's worker pool.

    Four structures, all owned by fh_keyed_t. See keyed.h for the contract.

    - A chained hash table from key bytes to a key entry (fh_keyed_slot_t).
      The hash is SipHash-1-3 with a per-table random key: ordering keys
      come from the bus, and a publisher who could make every key land in
      one bucket would turn each push into a walk of every key. The table
      doubles above one key per bucket and halves below one per eight.
    - Per key, a FIFO of queued messages: a singly linked list of small
      nodes (a message is shared by every consumer it went to, so it cannot
      carry our link itself). The node of a taken message stays with its
      entry, so a retry puts it back without allocating and cannot fail.
    - The ready ring: a FIFO, linked through the entries, of keys that are
      neither busy nor delayed and have a queued message. Its order is
      the round robin: take serves the head, done sends a key with more to
      do to the tail.
    - The delayed set: a binary heap of keys waiting for a retry's
      not_before, earliest first, ties in the order they were retried. Its
      array always has room for every key, so a retry never allocates.

    An entry exists exactly while its key is ready, busy or delayed, and is
    freed (or kept as one of a few spares) the moment none holds. The
    largest per-key backlog is kept in O(1) by counting keys per backlog
    length: a key's backlog moves by one at a time, so the maximum only
    ever steps down to a length that is known to have a key.
*/
#include "keyed.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define MIN_BUCKETS 16
#define MIN_HEAP 16
#define MIN_BACKLOG_LENGTHS 64
#define KEY_INLINE 48 /* keys up to this size live in the entry itself */

typedef struct s_node s_node_t;
struct s_node {
    s_node_t *next;
    fh_msg_t *msg;
};

typedef enum {
    S_READY,  /* in the ready ring */
    S_BUSY,   /* a message taken; in neither ring nor heap */
    S_DELAYED /* in the heap until not_before */
} s_state_t;

struct fh_keyed_slot {
    fh_keyed_slot_t *chain;      /* next in its bucket, or in the spares */
    fh_keyed_slot_t *ready_next; /* next in the ready ring */
    uint64_t hash;
    s_node_t *head, *tail; /* queued messages, oldest first */
    s_node_t *running;     /* the taken message, while S_BUSY */
    size_t queued;
    int64_t not_before;   /* while S_DELAYED */
    uint64_t delay_order; /* FIFO among equal not_before */
    unsigned retries;     /* of the message at head or running */
    s_state_t state;
    bool head_retried; /* head was started before: never coalesced */
    size_t key_size;
    unsigned char *key; /* key_inline, or its own allocation */
    unsigned char key_inline[KEY_INLINE];
};

struct fh_keyed {
    bool coalesce;
    uint64_t seed[2];

    fh_keyed_slot_t **buckets;
    size_t bucket_mask;
    size_t keys;

    fh_keyed_slot_t *ready_head, *ready_tail;

    fh_keyed_slot_t **heap;
    size_t heap_count, heap_cap; /* heap_cap >= keys, always */
    uint64_t delay_counter;

    /* by_backlog[b - 1]: how many keys have b queued messages. Its length
       is above the backlog of every busy key, so a retry (+1) never
       grows it: a push leaves room for one more, and it only shrinks to
       more than twice backlog_top. */
    size_t *by_backlog;
    size_t by_backlog_cap;
    size_t backlog_top, backlog_high;

    size_t queued, busy;

    fh_keyed_slot_t *spare_entries;
    size_t spare_entry_count, entries;
    s_node_t *spare_nodes;
    size_t spare_node_count, nodes;
};

/* SipHash-1-3 (Aumasson and Bernstein), the variant hash tables use. The
   key is random, so the result need not be the same across hosts and the
   message words are read in host order. */
#define S_ROTL(x, b) (uint64_t) (((x) << (b)) | ((x) >> (64 - (b))))
#define S_SIPROUND                                                                                 \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = S_ROTL (v1, 13);                                                                      \
        v1 ^= v0;                                                                                  \
        v0 = S_ROTL (v0, 32);                                                                      \
        v2 += v3;                                                                                  \
        v3 = S_ROTL (v3, 16);                                                                      \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = S_ROTL (v3, 21);                                                                      \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = S_ROTL (v1, 17);                                                                      \
        v1 ^= v2;                                                                                  \
        v2 = S_ROTL (v2, 32);                                                                      \
    } while (0)

static uint64_t
s_hash (const fh_keyed_t *self, const void *data, size_t size)
{
    const unsigned char *in = data;
    uint64_t v0 = UINT64_C (0x736f6d6570736575) ^ self->seed[0];
    uint64_t v1 = UINT64_C (0x646f72616e646f6d) ^ self->seed[1];
    uint64_t v2 = UINT64_C (0x6c7967656e657261) ^ self->seed[0];
    uint64_t v3 = UINT64_C (0x7465646279746573) ^ self->seed[1];
    size_t whole = size - size % 8;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m;
        memcpy (&m, in + i, 8);
        v3 ^= m;
        S_SIPROUND;
        v0 ^= m;
    }
    uint64_t last = (uint64_t) size << 56;
    for (size_t i = 0; i < size % 8; i++)
        last |= (uint64_t) in[whole + i] << (8 * i);
    v3 ^= last;
    S_SIPROUND;
    v0 ^= last;
    v2 ^= 0xff;
    S_SIPROUND;
    S_SIPROUND;
    S_SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

static void
s_seed (fh_keyed_t *self)
{
    if (getrandom (self->seed, sizeof self->seed, GRND_NONBLOCK) == sizeof self->seed)
        return;
    /* No entropy yet (early boot): still different per table and process,
       which is all that keeps chains short against an unlucky key set. */
    static atomic_uint_fast64_t tables;
    self->seed[0] = (uint64_t) (uintptr_t) self * UINT64_C (0x9e3779b97f4a7c15);
    self->seed[1] = (atomic_fetch_add (&tables, 1) + 1) * UINT64_C (0xbf58476d1ce4e5b9)
                    ^ (uint64_t) (uintptr_t) &tables;
}

fh_keyed_t *
fh_keyed_new (bool coalesce)
{
    fh_keyed_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->coalesce = coalesce;
    self->buckets = calloc (MIN_BUCKETS, sizeof *self->buckets);
    self->heap = malloc (MIN_HEAP * sizeof *self->heap);
    self->by_backlog = calloc (MIN_BACKLOG_LENGTHS, sizeof *self->by_backlog);
    if (!self->buckets || !self->heap || !self->by_backlog) {
        free (self->buckets);
        free (self->heap);
        free (self->by_backlog);
        free (self);
        return NULL;
    }
    self->bucket_mask = MIN_BUCKETS - 1;
    self->heap_cap = MIN_HEAP;
    self->by_backlog_cap = MIN_BACKLOG_LENGTHS;
    s_seed (self);
    return self;
}

/* Nodes and entries: from the spares when there are some. */

static s_node_t *
s_node_get (fh_keyed_t *self)
{
    s_node_t *node = self->spare_nodes;
    if (node) {
        self->spare_nodes = node->next;
        self->spare_node_count--;
        return node;
    }
    node = malloc (sizeof *node);
    if (node)
        self->nodes++;
    return node;
}

static void
s_node_put (fh_keyed_t *self, s_node_t *node)
{
    if (self->spare_node_count < FH_KEYED_SPARE_NODES) {
        node->next = self->spare_nodes;
        self->spare_nodes = node;
        self->spare_node_count++;
        return;
    }
    free (node);
    self->nodes--;
}

static fh_keyed_slot_t *
s_entry_get (fh_keyed_t *self, uint64_t hash, const void *key, size_t key_size)
{
    unsigned char *copy = NULL;
    if (key_size > KEY_INLINE && !(copy = malloc (key_size)))
        return NULL;
    fh_keyed_slot_t *entry = self->spare_entries;
    if (entry) {
        self->spare_entries = entry->chain;
        self->spare_entry_count--;
    }
    else {
        entry = malloc (sizeof *entry);
        if (!entry) {
            free (copy);
            return NULL;
        }
        self->entries++;
    }
    *entry = (fh_keyed_slot_t){.hash = hash, .key_size = key_size, .state = S_READY};
    entry->key = copy ? copy : entry->key_inline;
    if (key_size)
        memcpy (entry->key, key, key_size);
    return entry;
}

static void
s_entry_put (fh_keyed_t *self, fh_keyed_slot_t *entry)
{
    if (entry->key != entry->key_inline)
        free (entry->key);
    entry->key = entry->key_inline;
    if (self->spare_entry_count < FH_KEYED_SPARE_ENTRIES) {
        entry->chain = self->spare_entries;
        self->spare_entries = entry;
        self->spare_entry_count++;
        return;
    }
    free (entry);
    self->entries--;
}

/* The hash table. */

static void
s_rehash (fh_keyed_t *self, size_t buckets)
{
    fh_keyed_slot_t **table = calloc (buckets, sizeof *table);
    if (!table)
        return; /* longer chains, still correct */
    for (size_t b = 0; b <= self->bucket_mask; b++) {
        fh_keyed_slot_t *entry = self->buckets[b];
        while (entry) {
            fh_keyed_slot_t *next = entry->chain;
            size_t at = entry->hash & (buckets - 1);
            entry->chain = table[at];
            table[at] = entry;
            entry = next;
        }
    }
    free (self->buckets);
    self->buckets = table;
    self->bucket_mask = buckets - 1;
}

static fh_keyed_slot_t *
s_lookup (const fh_keyed_t *self, uint64_t hash, const void *key, size_t key_size)
{
    for (fh_keyed_slot_t *entry = self->buckets[hash & self->bucket_mask]; entry;
         entry = entry->chain)
        if (entry->hash == hash && entry->key_size == key_size
            && (key_size == 0 || memcmp (entry->key, key, key_size) == 0))
            return entry;
    return NULL;
}

static void
s_table_insert (fh_keyed_t *self, fh_keyed_slot_t *entry)
{
    size_t at = entry->hash & self->bucket_mask;
    entry->chain = self->buckets[at];
    self->buckets[at] = entry;
    self->keys++;
    if (self->keys > self->bucket_mask + 1)
        s_rehash (self, (self->bucket_mask + 1) * 2);
}

/* After keys went down: give back table and heap room that is mostly
   unused, so a burst of many keys leaves nothing behind once they are
   idle. Halving below a quarter (heap) or an eighth (buckets) keeps it
   amortized O(1), and the heap keeps room for every key. */
static void
s_shrink (fh_keyed_t *self)
{
    size_t buckets = self->bucket_mask + 1;
    while (buckets > MIN_BUCKETS && self->keys < buckets / 8)
        buckets /= 2;
    if (buckets != self->bucket_mask + 1)
        s_rehash (self, buckets);
    size_t cap = self->heap_cap;
    while (cap > MIN_HEAP && self->keys < cap / 4)
        cap /= 2;
    if (cap != self->heap_cap) {
        fh_keyed_slot_t **heap = realloc (self->heap, cap * sizeof *heap);
        if (heap) {
            self->heap = heap;
            self->heap_cap = cap;
        }
    }
}

/* Unlinks a key with nothing queued, taken or delayed, and frees it. */
static void
s_table_remove (fh_keyed_t *self, fh_keyed_slot_t *entry)
{
    fh_keyed_slot_t **link = &self->buckets[entry->hash & self->bucket_mask];
    while (*link != entry)
        link = &(*link)->chain;
    *link = entry->chain;
    self->keys--;
    s_entry_put (self, entry);
    s_shrink (self);
}

/* The ready ring. */

static void
s_ready_push (fh_keyed_t *self, fh_keyed_slot_t *entry)
{
    entry->state = S_READY;
    entry->ready_next = NULL;
    if (self->ready_tail)
        self->ready_tail->ready_next = entry;
    else
        self->ready_head = entry;
    self->ready_tail = entry;
}

static fh_keyed_slot_t *
s_ready_pop (fh_keyed_t *self)
{
    fh_keyed_slot_t *entry = self->ready_head;
    if (entry) {
        self->ready_head = entry->ready_next;
        if (!self->ready_head)
            self->ready_tail = NULL;
    }
    return entry;
}

/* The delayed heap. */

static inline bool
s_earlier (const fh_keyed_slot_t *a, const fh_keyed_slot_t *b)
{
    return a->not_before < b->not_before
           || (a->not_before == b->not_before && a->delay_order < b->delay_order);
}

static void
s_heap_push (fh_keyed_t *self, fh_keyed_slot_t *entry)
{
    assert (self->heap_count < self->heap_cap);
    size_t i = self->heap_count++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!s_earlier (entry, self->heap[parent]))
            break;
        self->heap[i] = self->heap[parent];
        i = parent;
    }
    self->heap[i] = entry;
}

static fh_keyed_slot_t *
s_heap_pop (fh_keyed_t *self)
{
    fh_keyed_slot_t *top = self->heap[0];
    fh_keyed_slot_t *last = self->heap[--self->heap_count];
    size_t n = self->heap_count;
    size_t i = 0;
    while (true) {
        size_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && s_earlier (self->heap[child + 1], self->heap[child]))
            child++;
        if (!s_earlier (self->heap[child], last))
            break;
        self->heap[i] = self->heap[child];
        i = child;
    }
    if (n)
        self->heap[i] = last;
    return top;
}

/* Backlog lengths. */

static int
s_backlog_reserve (fh_keyed_t *self, size_t length)
{
    if (length <= self->by_backlog_cap)
        return 0;
    size_t cap = self->by_backlog_cap * 2 > length ? self->by_backlog_cap * 2 : length;
    size_t *grown = realloc (self->by_backlog, cap * sizeof *grown);
    if (!grown)
        return -1;
    memset (grown + self->by_backlog_cap, 0, (cap - self->by_backlog_cap) * sizeof *grown);
    self->by_backlog = grown;
    self->by_backlog_cap = cap;
    return 0;
}

/* Above the top every count is zero: gives back what a past burst grew.
   Halving only while the top is below a quarter leaves the length above
   twice the top, so the +1 of a retry always fits. */
static void
s_backlog_shrink (fh_keyed_t *self)
{
    size_t cap = self->by_backlog_cap;
    while (cap > MIN_BACKLOG_LENGTHS && self->backlog_top < cap / 4)
        cap /= 2;
    if (cap == self->by_backlog_cap)
        return;
    size_t *shrunk = realloc (self->by_backlog, cap * sizeof *shrunk);
    if (shrunk) {
        self->by_backlog = shrunk;
        self->by_backlog_cap = cap;
    }
}

/* One key's backlog went from `from` to `to` (room for `to` reserved). */
static void
s_backlog_move (fh_keyed_t *self, size_t from, size_t to)
{
    if (from)
        self->by_backlog[from - 1]--;
    if (to)
        self->by_backlog[to - 1]++;
    if (to > self->backlog_top) {
        self->backlog_top = to;
        if (to > self->backlog_high)
            self->backlog_high = to;
        return;
    }
    while (self->backlog_top && self->by_backlog[self->backlog_top - 1] == 0)
        self->backlog_top--;
    s_backlog_shrink (self);
}

int
fh_keyed_push (fh_keyed_t *self, const void *key, size_t key_size, fh_msg_t *msg,
               fh_msg_t **replaced)
{
    assert (msg);
    assert (key || key_size == 0);
    *replaced = NULL;
    uint64_t hash = s_hash (self, key, key_size);
    fh_keyed_slot_t *entry = s_lookup (self, hash, key, key_size);
    if (entry && self->coalesce && entry->queued > (entry->head_retried ? 1u : 0u)) {
        /* Coalescing keeps at most one never-started message per key, so
           it is the tail; the newer takes its place in the key's order. */
        *replaced = entry->tail->msg;
        entry->tail->msg = msg;
        return 0;
    }
    /* Room for the new length and one more: a retry of this key's running
       message may add it later, and a retry cannot fail. */
    size_t backlog = entry ? entry->queued : 0;
    if (s_backlog_reserve (self, backlog + 2) != 0)
        return -1;
    if (!entry && self->keys + 1 > self->heap_cap) {
        fh_keyed_slot_t **heap = realloc (self->heap, self->heap_cap * 2 * sizeof *heap);
        if (!heap)
            return -1;
        self->heap = heap;
        self->heap_cap *= 2;
    }
    s_node_t *node = s_node_get (self);
    if (!node)
        return -1;
    bool fresh = !entry;
    if (fresh) {
        entry = s_entry_get (self, hash, key, key_size);
        if (!entry) {
            s_node_put (self, node);
            return -1;
        }
        s_table_insert (self, entry);
    }
    node->msg = msg;
    node->next = NULL;
    if (entry->tail)
        entry->tail->next = node;
    else
        entry->head = node;
    entry->tail = node;
    s_backlog_move (self, entry->queued, entry->queued + 1);
    entry->queued++;
    self->queued++;
    if (fresh)
        s_ready_push (self, entry);
    return 0;
}

fh_msg_t *
fh_keyed_take (fh_keyed_t *self, int64_t now_ns, fh_keyed_slot_t **slot, int64_t *next_due_ns)
{
    while (self->heap_count && self->heap[0]->not_before <= now_ns)
        s_ready_push (self, s_heap_pop (self));

    fh_msg_t *msg = NULL;
    fh_keyed_slot_t *entry = s_ready_pop (self);
    if (entry) {
        assert (entry->state == S_READY && entry->head);
        s_node_t *node = entry->head;
        entry->head = node->next;
        if (!entry->head)
            entry->tail = NULL;
        node->next = NULL;
        entry->running = node;
        entry->state = S_BUSY;
        entry->head_retried = false;
        s_backlog_move (self, entry->queued, entry->queued - 1);
        entry->queued--;
        self->queued--;
        self->busy++;
        msg = node->msg;
    }
    *slot = entry;
    if (next_due_ns)
        *next_due_ns = self->heap_count ? self->heap[0]->not_before : INT64_MAX;
    return msg;
}

void
fh_keyed_release (fh_keyed_t *self, fh_keyed_slot_t *slot)
{
    fh_keyed_slot_t *entry = slot;
    assert (entry && entry->state == S_BUSY && entry->running);
    s_node_put (self, entry->running);
    entry->running = NULL;
    entry->retries = 0;
    self->busy--;
    if (entry->queued)
        s_ready_push (self, entry); /* its next turn is after every other key's */
    else
        s_table_remove (self, entry);
}

void
fh_keyed_retry (fh_keyed_t *self, fh_keyed_slot_t *slot, int64_t not_before_ns)
{
    fh_keyed_slot_t *entry = slot;
    assert (entry && entry->state == S_BUSY && entry->running);
    s_node_t *node = entry->running;
    entry->running = NULL;
    self->busy--;
    node->next = entry->head;
    entry->head = node;
    if (!entry->tail)
        entry->tail = node;
    assert (entry->queued + 1 <= self->by_backlog_cap);
    s_backlog_move (self, entry->queued, entry->queued + 1);
    entry->queued++;
    self->queued++;
    entry->head_retried = true;
    if (entry->retries < UINT32_MAX)
        entry->retries++;
    entry->state = S_DELAYED;
    entry->not_before = not_before_ns;
    entry->delay_order = self->delay_counter++;
    s_heap_push (self, entry); /* heap_cap >= keys: never full */
}

unsigned
fh_keyed_slot_retries (const fh_keyed_slot_t *slot)
{
    return slot->retries;
}

/* Hands every queued message (retried ones included) to release (with
   arg), unless NULL. Taken messages stay taken: their keys stay. */
static void
s_purge (fh_keyed_t *self, fh_keyed_release_fn *release, void *arg)
{
    for (size_t b = 0; b <= self->bucket_mask; b++) {
        fh_keyed_slot_t **link = &self->buckets[b];
        while (*link) {
            fh_keyed_slot_t *entry = *link;
            while (entry->head) {
                s_node_t *node = entry->head;
                entry->head = node->next;
                if (release)
                    release (node->msg, arg);
                s_node_put (self, node);
            }
            entry->tail = NULL;
            entry->queued = 0;
            entry->head_retried = false;
            if (entry->state == S_BUSY) {
                link = &entry->chain; /* leaves when its message is done */
                continue;
            }
            *link = entry->chain;
            self->keys--;
            s_entry_put (self, entry);
        }
    }
    self->ready_head = self->ready_tail = NULL;
    self->heap_count = 0;
    self->queued = 0;
    memset (self->by_backlog, 0, self->by_backlog_cap * sizeof *self->by_backlog);
    self->backlog_top = 0;
    s_backlog_shrink (self);
    s_shrink (self);
}

/* Frees the spare entries and nodes kept for reuse. */
static void
s_trim (fh_keyed_t *self)
{
    while (self->spare_entries) {
        fh_keyed_slot_t *entry = self->spare_entries;
        self->spare_entries = entry->chain;
        free (entry);
        self->entries--;
    }
    self->spare_entry_count = 0;
    while (self->spare_nodes) {
        s_node_t *node = self->spare_nodes;
        self->spare_nodes = node->next;
        free (node);
        self->nodes--;
    }
    self->spare_node_count = 0;
}

void
fh_keyed_destroy (fh_keyed_t **self_p, fh_keyed_release_fn *release, void *arg)
{
    fh_keyed_t *self = *self_p;
    if (!self)
        return;
    s_purge (self, release, arg);
    /* What is left is busy keys, whose messages are not ours. */
    for (size_t b = 0; b <= self->bucket_mask; b++) {
        while (self->buckets[b]) {
            fh_keyed_slot_t *entry = self->buckets[b];
            self->buckets[b] = entry->chain;
            s_node_put (self, entry->running);
            s_entry_put (self, entry);
        }
    }
    s_trim (self);
    free (self->buckets);
    free (self->heap);
    free (self->by_backlog);
    free (self);
    *self_p = NULL;
}

size_t
fh_keyed_queued (const fh_keyed_t *self)
{
    return self->queued;
}

size_t
fh_keyed_busy (const fh_keyed_t *self)
{
    return self->busy;
}

size_t
fh_keyed_delayed (const fh_keyed_t *self)
{
    return self->heap_count;
}

size_t
fh_keyed_keys (const fh_keyed_t *self)
{
    return self->keys;
}

size_t
fh_keyed_max_key_backlog (const fh_keyed_t *self)
{
    return self->backlog_top;
}

size_t
fh_keyed_key_backlog_high (const fh_keyed_t *self)
{
    return self->backlog_high;
}

size_t
fh_keyed_live_entries (const fh_keyed_t *self)
{
    return self->entries;
}

size_t
fh_keyed_live_nodes (const fh_keyed_t *self)
{
    return self->nodes;
}
