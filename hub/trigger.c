/*  trigger - the trigger table: which consumers does a topic go to?

    A byte trie over the literal part of every pattern. Each node lists the
    consumers whose prefix pattern ends there, those whose exact pattern
    ends there, and the globs whose literal prefix (the text before the
    first '*') ends there. A lookup walks the topic down the trie once,
    collecting prefix matches on the way, exact matches at the end, and
    trying only the globs it passes. See trigger.h for the semantics. A
    table of "" patterns only (consumers without topics) answers every
    topic alike: that answer is looked up once, when it is sealed.

    The memo: a lookup that had globs to try is remembered, topic ->
    consumers, in a hash table of the table's own. Topics repeat (fedmsg's
    name a service and an event, not a message), and a glob such as
    "*.buildsys.*" has no literal head to file it under in the trie: it is
    searched for in every topic. A remembered topic costs a hash and a
    compare instead. The table never changes once sealed (a reload builds
    a new one), so a remembered answer stays exact. When the memo is half
    full, or its byte store is, it is emptied and fills again: a stream of
    topics that never repeat costs one hash and one insert per lookup. The
    memo (about 350 KiB) is allocated after a few dozen such lookups, so a
    table looked up only now and then (tools, tests) does without it.
*/
#include "trigger.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t *items;
    size_t count;
} s_idlist_t;

typedef struct s_node s_node_t;
struct s_node {
    uint8_t *edge_bytes; /* child i is reached by edge_bytes[i] */
    s_node_t **children;
    size_t child_count;
    s_idlist_t prefix; /* consumers with a prefix pattern ending here */
    s_idlist_t exact;  /* consumers with an exact pattern ending here */
    s_idlist_t globs;  /* indices into fh_trigger_t.globs */
};

/* A glob cut at its first and last '*': head * middle * tail, where the
   middle may hold more stars. Matching checks the head (the trie already
   did), the tail against the end of the topic, then finds the middle's
   pieces in order: a glob that cannot match is refused in a few
   instructions, where the backtracking walk took one pass per star. */
typedef struct {
    /* The tail's last (up to) 8 bytes where a topic's last 8 bytes would
       have them: a glob whose tail cannot end the topic is refused with
       one compare, before any call. */
    uint64_t tail_key, tail_mask;
    size_t head_len;
    const char *middle; /* between the first and the last '*' */
    size_t middle_len;
    const char *tail; /* after the last '*' */
    size_t tail_len;
} s_glob_parts_t;

typedef struct {
    char *pattern; /* the whole glob, '*' included */
    s_glob_parts_t parts;
    uint32_t consumer;
} s_glob_t;

/* One remembered lookup; hash 0 marks a free slot. Its bytes, in
   memo_bytes at `offset`: `count` consumer ids, then the topic. */
typedef struct {
    uint64_t hash;
    uint32_t offset;
    uint32_t topic_size;
    uint32_t count;
} s_memo_slot_t;

#define MEMO_SLOTS 4096                  /* a power of two; at most half in use */
#define MEMO_BYTES (256 * 1024)          /* the ids and topics of all entries */
#define MEMO_ENTRY_MAX (MEMO_BYTES / 16) /* a larger answer is not kept */
#define MEMO_AFTER 64 /* lookups with globs before the memo is worth its memory */

static void s_glob_cut (const char *pattern, s_glob_parts_t *parts);
static size_t s_match_walk (fh_trigger_t *self, const uint8_t *bytes, size_t size, uint32_t *out,
                            bool *tried_globs);
static bool s_glob_match (const char *pattern, const s_glob_parts_t *parts, const uint8_t *text,
                          size_t size, size_t known);

struct fh_trigger {
    size_t consumer_count;
    s_node_t *root;
    s_glob_t *globs;
    size_t glob_count;
    char **subscriptions; /* what a SUB socket must subscribe to */
    size_t subscription_count;
    uint64_t *seen; /* scratch bitset for one lookup */
    size_t seen_words;
    bool sealed;
    /* When every pattern is "" (consumers without topics: every message),
       the answer for any topic, ascending; else NULL. */
    uint32_t *always;
    size_t always_count;
    /* The memo, allocated after MEMO_AFTER lookups that tried globs. */
    size_t glob_lookups;
    s_memo_slot_t *memo;
    uint8_t *memo_bytes;
    size_t memo_entries, memo_bytes_used;
    bool memo_failed; /* out of memory once: no memo */
};

static int
s_idlist_add (s_idlist_t *list, uint32_t id)
{
    /* The hub adds consumers in index order: then a duplicate can only be
       the last id, and 20,000 consumers on one node cost no scan. */
    if (list->count && list->items[list->count - 1] >= id)
        for (size_t i = 0; i < list->count; i++)
            if (list->items[i] == id)
                return 0; /* the same pattern twice for one consumer */
    /* Room doubles when the count reaches a power of two. */
    size_t count = list->count;
    if ((count & (count - 1)) == 0) {
        uint32_t *items = realloc (list->items, (count ? 2 * count : 1) * sizeof *items);
        if (!items)
            return -1;
        list->items = items;
    }
    list->items[list->count++] = id;
    return 0;
}

static s_node_t *
s_node_child (const s_node_t *node, uint8_t byte)
{
    for (size_t i = 0; i < node->child_count; i++)
        if (node->edge_bytes[i] == byte)
            return node->children[i];
    return NULL;
}

/* The node for `text`, created along the way. */
static s_node_t *
s_node_walk_create (s_node_t *node, const char *text, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        uint8_t byte = (uint8_t) text[i];
        s_node_t *child = s_node_child (node, byte);
        if (!child) {
            child = calloc (1, sizeof *child);
            uint8_t *bytes = realloc (node->edge_bytes, node->child_count + 1);
            if (bytes)
                node->edge_bytes = bytes;
            s_node_t **children
                = realloc (node->children, (node->child_count + 1) * sizeof *children);
            if (children)
                node->children = children;
            if (!child || !bytes || !children) {
                free (child);
                return NULL;
            }
            node->edge_bytes[node->child_count] = byte;
            node->children[node->child_count++] = child;
        }
        node = child;
    }
    return node;
}

static void
s_node_destroy (s_node_t *node)
{
    if (!node)
        return;
    for (size_t i = 0; i < node->child_count; i++)
        s_node_destroy (node->children[i]);
    free (node->edge_bytes);
    free (node->children);
    free (node->prefix.items);
    free (node->exact.items);
    free (node->globs.items);
    free (node);
}

fh_trigger_t *
fh_trigger_new (size_t consumer_count)
{
    assert (consumer_count < UINT32_MAX);
    fh_trigger_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->consumer_count = consumer_count;
    self->root = calloc (1, sizeof *self->root);
    self->seen_words = (consumer_count + 63) / 64;
    self->seen = calloc (self->seen_words ? self->seen_words : 1, sizeof (uint64_t));
    if (!self->root || !self->seen)
        fh_trigger_destroy (&self);
    return self;
}

void
fh_trigger_destroy (fh_trigger_t **self_p)
{
    fh_trigger_t *self = *self_p;
    if (!self)
        return;
    s_node_destroy (self->root);
    for (size_t i = 0; i < self->glob_count; i++)
        free (self->globs[i].pattern);
    free (self->globs);
    for (size_t i = 0; i < self->subscription_count; i++)
        free (self->subscriptions[i]);
    free (self->subscriptions);
    free (self->seen);
    free (self->always);
    free (self->memo);
    free (self->memo_bytes);
    free (self);
    *self_p = NULL;
}

static int
s_subscription_add (fh_trigger_t *self, const char *prefix, size_t size)
{
    char **list = realloc (self->subscriptions, (self->subscription_count + 1) * sizeof *list);
    if (!list)
        return -1;
    self->subscriptions = list;
    char *copy = strndup (prefix, size);
    if (!copy)
        return -1;
    list[self->subscription_count++] = copy;
    return 0;
}

int
fh_trigger_add (fh_trigger_t *self, size_t consumer, const char *pattern)
{
    assert (!self->sealed);
    assert (consumer < self->consumer_count);
    uint32_t id = (uint32_t) consumer;
    if (pattern[0] == '=') {
        const char *topic = pattern + 1;
        s_node_t *node = s_node_walk_create (self->root, topic, strlen (topic));
        if (!node || s_idlist_add (&node->exact, id) != 0)
            return -1;
        return s_subscription_add (self, topic, strlen (topic));
    }
    const char *star = strchr (pattern, '*');
    if (!star) {
        s_node_t *node = s_node_walk_create (self->root, pattern, strlen (pattern));
        if (!node || s_idlist_add (&node->prefix, id) != 0)
            return -1;
        return s_subscription_add (self, pattern, strlen (pattern));
    }
    size_t literal = (size_t) (star - pattern);
    s_node_t *node = s_node_walk_create (self->root, pattern, literal);
    if (!node)
        return -1;
    s_glob_t *globs = realloc (self->globs, (self->glob_count + 1) * sizeof *globs);
    if (!globs)
        return -1;
    self->globs = globs;
    char *copy = strdup (pattern);
    if (!copy)
        return -1;
    if (s_idlist_add (&node->globs, (uint32_t) self->glob_count) != 0) {
        free (copy);
        return -1;
    }
    globs[self->glob_count] = (s_glob_t){copy, {0, 0, 0, NULL, 0, NULL, 0}, id};
    s_glob_cut (copy, &globs[self->glob_count].parts);
    self->glob_count++;
    return s_subscription_add (self, pattern, literal);
}

static int
s_compare_strings (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

int
fh_trigger_seal (fh_trigger_t *self)
{
    /* Keep only subscriptions no shorter one already covers: after sorting,
       a covered string comes right after a kept prefix of it. */
    if (self->subscription_count) /* none: a hub of fedora_messaging consumers only */
        qsort (self->subscriptions, self->subscription_count, sizeof *self->subscriptions,
               s_compare_strings);
    size_t kept = 0;
    for (size_t i = 0; i < self->subscription_count; i++) {
        char *s = self->subscriptions[i];
        if (kept > 0) {
            const char *last = self->subscriptions[kept - 1];
            if (strncmp (s, last, strlen (last)) == 0) {
                free (s);
                continue;
            }
        }
        self->subscriptions[kept++] = s;
    }
    self->subscription_count = kept;
    self->sealed = true;
    /* Nothing but prefix patterns ending at the root (""): every topic
       gets the empty topic's answer, looked up once here. Out of memory,
       lookups walk the trie as for any other table. */
    const s_node_t *root = self->root;
    if (!root->child_count && !root->globs.count && !root->exact.count
        && (self->always
            = malloc ((root->prefix.count ? root->prefix.count : 1) * sizeof *self->always))) {
        bool tried_globs;
        self->always_count
            = s_match_walk (self, (const uint8_t *) "", 0, self->always, &tried_globs);
    }
    return 0;
}

/* A topic's last 8 bytes as a little-endian word, the first byte of a
   shorter topic in the word's top bytes (and zeros below). */
static inline uint64_t
s_last8 (const uint8_t *bytes, size_t size)
{
    uint64_t word = 0;
    size_t k = size < 8 ? size : 8;
    for (size_t i = 0; i < k; i++)
        word |= (uint64_t) bytes[size - k + i] << (8 * (8 - k + i));
    return word;
}

static inline void
s_seen_set (fh_trigger_t *self, uint32_t id)
{
    self->seen[id / 64] |= UINT64_C (1) << (id % 64);
}

static inline bool
s_seen_has (const fh_trigger_t *self, uint32_t id)
{
    return (self->seen[id / 64] >> (id % 64)) & 1u;
}

/* The trie walk: the consumers matching topic, ascending, into out.
   *tried_globs: whether the walk met globs to try (the costly case). */
static size_t
s_match_walk (fh_trigger_t *self, const uint8_t *bytes, size_t size, uint32_t *out,
              bool *tried_globs)
{
    const s_node_t *node = self->root;
    uint64_t last8 = 0;
    bool have_last8 = false; /* read at the first glob on the way */
    for (size_t depth = 0;; depth++) {
        if (node->globs.count && !have_last8) {
            last8 = s_last8 (bytes, size);
            have_last8 = true;
        }
        for (size_t i = 0; i < node->prefix.count; i++)
            s_seen_set (self, node->prefix.items[i]);
        for (size_t i = 0; i < node->globs.count; i++) {
            const s_glob_t *glob = &self->globs[node->globs.items[i]];
            /* The trie walked the glob's head to get here. */
            if (((last8 ^ glob->parts.tail_key) & glob->parts.tail_mask) == 0
                && !s_seen_has (self, glob->consumer)
                && s_glob_match (glob->pattern, &glob->parts, bytes, size, depth))
                s_seen_set (self, glob->consumer);
        }
        if (depth == size) {
            for (size_t i = 0; i < node->exact.count; i++)
                s_seen_set (self, node->exact.items[i]);
            break;
        }
        node = s_node_child (node, bytes[depth]);
        if (!node)
            break;
    }
    *tried_globs = have_last8;
    /* Read out ascending, clearing the scratch for the next lookup. */
    size_t found = 0;
    for (size_t w = 0; w < self->seen_words; w++) {
        uint64_t word = self->seen[w];
        while (word) {
            unsigned bit = (unsigned) __builtin_ctzll (word);
            out[found++] = (uint32_t) (w * 64 + bit);
            word &= word - 1;
        }
        self->seen[w] = 0;
    }
    return found;
}

/* A 64-bit hash of the topic, 8 bytes a step; never 0 (a free slot). */
static inline uint64_t
s_topic_hash (const uint8_t *bytes, size_t size)
{
    uint64_t hash = UINT64_C (0x9e3779b97f4a7c15) ^ size;
    uint64_t word;
    for (; size >= 8; bytes += 8, size -= 8) {
        memcpy (&word, bytes, 8);
        hash = (hash ^ word) * UINT64_C (0xbf58476d1ce4e5b9);
        hash ^= hash >> 31;
    }
    word = 0;
    if (size)
        memcpy (&word, bytes, size);
    hash = (hash ^ word) * UINT64_C (0x94d049bb133111eb);
    hash ^= hash >> 29;
    return hash | 1;
}

/* The memo's slot for this topic: its entry, or the free slot where it
   would go (hash 0). */
static s_memo_slot_t *
s_memo_find (fh_trigger_t *self, uint64_t hash, const uint8_t *bytes, size_t size)
{
    for (size_t i = hash & (MEMO_SLOTS - 1);; i = (i + 1) & (MEMO_SLOTS - 1)) {
        s_memo_slot_t *slot = &self->memo[i];
        if (slot->hash == 0
            || (slot->hash == hash && slot->topic_size == size
                && memcmp (self->memo_bytes + slot->offset + slot->count * sizeof (uint32_t), bytes,
                           size)
                       == 0))
            return slot;
    }
}

/* Remembers a lookup's answer; emptying the memo first when it is full. */
static void
s_memo_put (fh_trigger_t *self, uint64_t hash, const uint8_t *bytes, size_t size,
            const uint32_t *ids, size_t count)
{
    size_t need = count * sizeof (uint32_t) + size;
    if (need > MEMO_ENTRY_MAX)
        return;
    if (!self->memo && !self->memo_failed) {
        if (++self->glob_lookups < MEMO_AFTER)
            return;
        self->memo = calloc (MEMO_SLOTS, sizeof *self->memo);
        self->memo_bytes = malloc (MEMO_BYTES);
        if (!self->memo || !self->memo_bytes) {
            free (self->memo);
            free (self->memo_bytes);
            self->memo = NULL;
            self->memo_bytes = NULL;
            self->memo_failed = true;
        }
    }
    if (!self->memo)
        return;
    size_t offset = (self->memo_bytes_used + 3) & ~(size_t) 3; /* ids are aligned */
    if (self->memo_entries >= MEMO_SLOTS / 2 || offset + need > MEMO_BYTES) {
        memset (self->memo, 0, MEMO_SLOTS * sizeof *self->memo);
        self->memo_entries = 0;
        offset = 0;
    }
    s_memo_slot_t *slot = s_memo_find (self, hash, bytes, size);
    memcpy (self->memo_bytes + offset, ids, count * sizeof (uint32_t));
    memcpy (self->memo_bytes + offset + count * sizeof (uint32_t), bytes, size);
    *slot = (s_memo_slot_t){hash, (uint32_t) offset, (uint32_t) size, (uint32_t) count};
    self->memo_entries++;
    self->memo_bytes_used = offset + need;
}

size_t
fh_trigger_match (fh_trigger_t *self, const void *topic, size_t size, uint32_t *out)
{
    assert (self->sealed);
    if (self->always) {
        memcpy (out, self->always, self->always_count * sizeof *out);
        return self->always_count;
    }
    const uint8_t *bytes = (const uint8_t *) topic;
    uint64_t hash = 0;
    if (self->memo) {
        hash = s_topic_hash (bytes, size);
        const s_memo_slot_t *slot = s_memo_find (self, hash, bytes, size);
        if (slot->hash) {
            memcpy (out, self->memo_bytes + slot->offset, slot->count * sizeof (uint32_t));
            return slot->count;
        }
    }
    bool tried_globs;
    size_t found = s_match_walk (self, bytes, size, out, &tried_globs);
    if (tried_globs && !self->memo_failed)
        s_memo_put (self, hash ? hash : s_topic_hash (bytes, size), bytes, size, out, found);
    return found;
}

size_t
fh_trigger_memo_size (const fh_trigger_t *self)
{
    return self->memo_entries;
}

size_t
fh_trigger_subscriptions (fh_trigger_t *self, const char *const **list)
{
    assert (self->sealed);
    *list = (const char *const *) self->subscriptions;
    return self->subscription_count;
}

static void
s_glob_cut (const char *pattern, s_glob_parts_t *parts)
{
    const char *first = strchr (pattern, '*');
    const char *last = strrchr (pattern, '*');
    assert (first && last);
    parts->head_len = (size_t) (first - pattern);
    parts->middle = first + 1;
    parts->middle_len = last > first ? (size_t) (last - first - 1) : 0;
    parts->tail = last + 1;
    parts->tail_len = strlen (last + 1);
    size_t k = parts->tail_len < 8 ? parts->tail_len : 8;
    parts->tail_key = 0;
    parts->tail_mask = 0;
    for (size_t i = 0; i < k; i++) {
        unsigned shift = (unsigned) (8 * (8 - k + i));
        parts->tail_key |= (uint64_t) (uint8_t) parts->tail[parts->tail_len - k + i] << shift;
        parts->tail_mask |= UINT64_C (0xff) << shift;
    }
}

/* The first place at or after `from` where piece[0..len) lies whole
   before `end`, or SIZE_MAX. */
static size_t
s_find (const uint8_t *text, size_t from, size_t end, const char *piece, size_t len)
{
    for (size_t i = from; i + len <= end; i++)
        if (text[i] == (uint8_t) piece[0] && memcmp (text + i, piece, len) == 0)
            return i;
    return SIZE_MAX;
}

/* '*' matches any run of bytes. The head must start the topic and the
   tail end it, without overlapping; the middle's pieces must then appear
   in order between them, and the leftmost place for each is as good as
   any. `known`: bytes of the head already compared. Linear in the topic
   for each piece, never allocates. */
static bool
s_glob_match (const char *pattern, const s_glob_parts_t *parts, const uint8_t *text, size_t size,
              size_t known)
{
    if (size < parts->head_len + parts->tail_len)
        return false;
    size_t end = size - parts->tail_len;
    if ((parts->tail_len && memcmp (text + end, parts->tail, parts->tail_len) != 0)
        || (known < parts->head_len
            && memcmp (text + known, pattern + known, parts->head_len - known) != 0))
        return false;
    size_t t = parts->head_len;
    const char *piece = parts->middle;
    const char *stop = parts->middle + parts->middle_len;
    while (piece < stop) {
        const char *star = memchr (piece, '*', (size_t) (stop - piece));
        size_t len = (size_t) ((star ? star : stop) - piece);
        if (len) {
            size_t at = s_find (text, t, end, piece, len);
            if (at == SIZE_MAX)
                return false;
            t = at + len;
        }
        piece += len + 1;
    }
    return true;
}

bool
fh_pattern_match (const char *pattern, const void *topic, size_t size)
{
    const uint8_t *text = (const uint8_t *) topic;
    if (pattern[0] == '=') {
        size_t len = strlen (pattern + 1);
        return len == size && memcmp (pattern + 1, text, size) == 0;
    }
    if (strchr (pattern, '*')) {
        s_glob_parts_t parts;
        s_glob_cut (pattern, &parts);
        return s_glob_match (pattern, &parts, text, size, 0);
    }
    size_t len = strlen (pattern);
    return len <= size && memcmp (pattern, text, len) == 0;
}
