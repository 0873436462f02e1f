/*  gaps - publisher gap detection. See gaps.h.

    The table maps a producer key to its last counter: open addressing
    with linear probing, FNV-1a hashes, doubled when half full, never past
    max_producers. Bodies are parsed with jansson only when detection is
    configured (it costs a parse per message).
*/
#include "gaps.h"

#include "fnv.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *key; /* NULL: free slot */
    size_t key_size;
    json_int_t last;
} s_slot_t;

struct fh_gaps {
    char *counter;
    enum { BY_TOPIC, BY_TOPIC_PREFIX, BY_JSON } by;
    unsigned prefix_segments;
    char *pointer;
    size_t max_producers;
    s_slot_t *slots;
    size_t slot_count;
    atomic_size_t used;
    atomic_uint_fast64_t lost, restarts, untracked;
};

fh_gaps_t *
fh_gaps_new (const char *counter, const char *producer, size_t max_producers)
{
    fh_gaps_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->counter = strdup (counter);
    self->max_producers = max_producers ? max_producers : 1;
    self->slot_count = 64;
    self->slots = calloc (self->slot_count, sizeof *self->slots);
    if (producer && strncmp (producer, "topic_prefix:", 13) == 0) {
        self->by = BY_TOPIC_PREFIX;
        self->prefix_segments = (unsigned) strtoul (producer + 13, NULL, 10);
    }
    else if (producer && strncmp (producer, "json:", 5) == 0) {
        self->by = BY_JSON;
        self->pointer = strdup (producer + 5);
    }
    if (!self->counter || !self->slots || (self->by == BY_JSON && !self->pointer))
        fh_gaps_destroy (&self);
    return self;
}

void
fh_gaps_destroy (fh_gaps_t **self_p)
{
    fh_gaps_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; self->slots && i < self->slot_count; i++)
        free (self->slots[i].key);
    free (self->slots);
    free (self->counter);
    free (self->pointer);
    free (self);
    *self_p = NULL;
}

static uint64_t
s_hash (const void *data, size_t size)
{
    return fh_fnv1a (data, size);
}

static s_slot_t *
s_find (s_slot_t *slots, size_t count, const void *key, size_t size)
{
    size_t i = (size_t) s_hash (key, size) & (count - 1);
    while (slots[i].key && !(slots[i].key_size == size && memcmp (slots[i].key, key, size) == 0))
        i = (i + 1) & (count - 1);
    return &slots[i];
}

static bool
s_grow (fh_gaps_t *self)
{
    size_t count = self->slot_count * 2;
    s_slot_t *slots = calloc (count, sizeof *slots);
    if (!slots)
        return false;
    for (size_t i = 0; i < self->slot_count; i++)
        if (self->slots[i].key)
            *s_find (slots, count, self->slots[i].key, self->slots[i].key_size) = self->slots[i];
    free (self->slots);
    self->slots = slots;
    self->slot_count = count;
    return true;
}

/* Saturates at INT64_MAX: every export is a signed 64-bit figure, and a
   producer's counter may jump by up to 2^64 - 1 (i = -2^63, then 2^63 - 1). */
static inline void
s_add (atomic_uint_fast64_t *counter, uint64_t n)
{
    uint64_t now = atomic_load_explicit (counter, memory_order_relaxed);
    uint64_t room = (uint64_t) INT64_MAX
                    - (now < (uint64_t) INT64_MAX ? now : (uint64_t) INT64_MAX);
    atomic_store_explicit (counter, now + (n < room ? n : room), memory_order_relaxed);
}

/* A producer's next counter: numbers skipped are lost, one that goes back
   is a restart, and so is one that leaps further ahead than a bus could
   lose (FH_GAPS_MAX_JUMP): one bogus number (i = 2^63 - 1) must not pin
   lost at its ceiling for the rest of the hub's life. Either way the new
   number is the last: a producer that did renumber goes on from it, and
   after a bogus one the next true number is one more restart. */
static void
s_next (fh_gaps_t *self, s_slot_t *slot, json_int_t number)
{
    /* In unsigned arithmetic: the signed difference may overflow. */
    uint64_t step = (uint64_t) number - (uint64_t) slot->last;
    if (number > slot->last && step <= FH_GAPS_MAX_JUMP) {
        if (step > 1)
            s_add (&self->lost, step - 1);
    }
    else
        s_add (&self->restarts, 1);
    slot->last = number;
}

void
fh_gaps_check (fh_gaps_t *self, const void *topic, size_t topic_size, const void *body,
               size_t body_size)
{
    json_t *doc = json_loadb (body, body_size, JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL, NULL);
    json_t *counter = json_is_object (doc) ? json_object_get (doc, self->counter) : NULL;
    const char *key = topic;
    size_t key_size = topic_size;
    if (self->by == BY_TOPIC_PREFIX) {
        /* The first N segments, or the whole topic when it has fewer. */
        const char *t = topic;
        unsigned dots = 0;
        for (size_t i = 0; i < topic_size; i++)
            if (t[i] == '.' && ++dots == self->prefix_segments) {
                key_size = i;
                break;
            }
    }
    else if (self->by == BY_JSON) {
        json_t *value = doc;
        /* RFC 6901, enough of it for producer names: plain tokens, ~0 ~1. */
        const char *p = self->pointer;
        while (value && *p == '/') {
            char token[256];
            size_t n = 0;
            for (p++; *p && *p != '/' && n < sizeof token - 1; p++) {
                if (*p == '~' && (p[1] == '0' || p[1] == '1'))
                    token[n++] = *++p == '0' ? '~' : '/';
                else
                    token[n++] = *p;
            }
            token[n] = '\0';
            value = json_is_object (value)  ? json_object_get (value, token)
                    : json_is_array (value) ? json_array_get (value, strtoul (token, NULL, 10))
                                            : NULL;
        }
        key = json_is_string (value) ? json_string_value (value) : NULL;
        key_size = key ? json_string_length (value) : 0;
    }
    if (!json_is_integer (counter) || !key) {
        s_add (&self->untracked, 1);
        json_decref (doc);
        return;
    }
    json_int_t number = json_integer_value (counter);
    s_slot_t *slot = s_find (self->slots, self->slot_count, key, key_size);
    if (!slot->key) {
        size_t used = atomic_load_explicit (&self->used, memory_order_relaxed);
        if (used >= self->max_producers) {
            s_add (&self->untracked, 1);
            json_decref (doc);
            return;
        }
        if (2 * (used + 1) > self->slot_count) {
            if (!s_grow (self)) {
                s_add (&self->untracked, 1);
                json_decref (doc);
                return;
            }
            slot = s_find (self->slots, self->slot_count, key, key_size);
        }
        slot->key = malloc (key_size ? key_size : 1);
        if (!slot->key) {
            s_add (&self->untracked, 1);
            json_decref (doc);
            return;
        }
        memcpy (slot->key, key, key_size);
        slot->key_size = key_size;
        slot->last = number;
        atomic_store_explicit (&self->used, used + 1, memory_order_relaxed);
    }
    else
        s_next (self, slot, number);
    json_decref (doc);
}

void
fh_gaps_counts (fh_gaps_t *self, fh_gaps_counts_t *out)
{
    out->lost = atomic_load_explicit (&self->lost, memory_order_relaxed);
    out->restarts = atomic_load_explicit (&self->restarts, memory_order_relaxed);
    out->untracked = atomic_load_explicit (&self->untracked, memory_order_relaxed);
    out->producers = atomic_load_explicit (&self->used, memory_order_relaxed);
}
