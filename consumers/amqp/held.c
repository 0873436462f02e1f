/*  held.c - messages the broker returned (mandatory, 312 NO_ROUTE), kept
    by the link's thread per routing key, and the route's backoff.

    A returned message is not answered RETRY: backing off each message on
    its own in the hub held everything behind it for the length of its
    backoff (and the hub's window filled with retries), so 200 messages
    sent before the topology existed trickled in for a minute once it did.
    It stays here instead, at its place by the hub's sequence number in its
    routing key's list. A key with a list is held: a newer message of that
    key joins the list instead of being published, so each key's order
    stays. The oldest message of the key is the probe: published when the
    key's backoff allows (100 ms, doubling up to 1 s while it keeps coming
    back), one at a time. Once a probe is confirmed without a return the
    route is there: the key's whole list is released, in order, to be
    published at once. Only the link's thread calls these.
*/
#include "bridge.h"

#include <stdlib.h>
#include <string.h>

#define HELD_BACKOFF_MIN_NS (100 * INT64_C (1000000))
#define HELD_BACKOFF_MAX_NS (1000 * INT64_C (1000000))

typedef struct {
    char *name; /* the routing key */
    size_t len;
    bridge_job_t *head; /* by seq; linked through job->next */
    bool probing;       /* its oldest is published as a probe */
    int64_t backoff_ns;
    int64_t next_probe_ns;
} s_key_t;

struct bridge_held {
    s_key_t *keys;
    size_t count, cap;
};

bridge_held_t *
bridge_held_new (void)
{
    return calloc (1, sizeof (bridge_held_t));
}

static s_key_t *
s_find (bridge_held_t *self, const bridge_job_t *job)
{
    for (size_t i = 0; i < self->count; i++)
        if (self->keys[i].len == job->key_size
            && memcmp (self->keys[i].name, job->data, job->key_size) == 0)
            return &self->keys[i];
    return NULL;
}

/* job into key's list at its place by seq. */
static void
s_insert (s_key_t *key, bridge_job_t *job)
{
    bridge_job_t **at = &key->head;
    while (*at && (*at)->seq <= job->seq)
        at = &(*at)->next;
    job->next = *at;
    *at = job;
}

static void
s_remove (bridge_held_t *self, s_key_t *key)
{
    free (key->name);
    *key = self->keys[--self->count];
}

bool
bridge_held_queue (bridge_held_t *self, bridge_job_t *job)
{
    s_key_t *key = self->count ? s_find (self, job) : NULL;
    if (key)
        s_insert (key, job);
    return key != NULL;
}

int
bridge_held_add (bridge_held_t *self, bridge_job_t *job, bool probe, int64_t now)
{
    s_key_t *key = s_find (self, job);
    if (!key) {
        if (self->count == self->cap) {
            size_t cap = self->cap ? 2 * self->cap : 8;
            s_key_t *more = realloc (self->keys, cap * sizeof *more);
            if (!more)
                return -1;
            self->keys = more;
            self->cap = cap;
        }
        char *name = malloc (job->key_size + 1);
        if (!name)
            return -1;
        memcpy (name, job->data, job->key_size);
        key = &self->keys[self->count++];
        *key = (s_key_t){.name = name, .len = job->key_size, .backoff_ns = HELD_BACKOFF_MIN_NS};
        key->next_probe_ns = now + key->backoff_ns;
    }
    else if (probe) { /* came back again: the route is still missing */
        key->probing = false;
        key->backoff_ns *= 2;
        if (key->backoff_ns > HELD_BACKOFF_MAX_NS)
            key->backoff_ns = HELD_BACKOFF_MAX_NS;
        key->next_probe_ns = now + key->backoff_ns;
    }
    s_insert (key, job);
    return 0;
}

bridge_job_t *
bridge_held_probe (bridge_held_t *self, int64_t now)
{
    for (size_t i = 0; i < self->count; i++) {
        s_key_t *key = &self->keys[i];
        if (!key->probing && key->head && now >= key->next_probe_ns) {
            bridge_job_t *job = key->head;
            key->head = job->next;
            job->next = NULL;
            key->probing = true;
            return job;
        }
    }
    return NULL;
}

bridge_job_t *
bridge_held_release (bridge_held_t *self, const bridge_job_t *probe)
{
    s_key_t *key = s_find (self, probe);
    if (!key)
        return NULL;
    bridge_job_t *list = key->head;
    s_remove (self, key);
    return list;
}

int64_t
bridge_held_next_ns (const bridge_held_t *self)
{
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < self->count; i++)
        if (!self->keys[i].probing && self->keys[i].head && self->keys[i].next_probe_ns < next)
            next = self->keys[i].next_probe_ns;
    return next;
}

bridge_job_t *
bridge_held_take_all (bridge_held_t *self)
{
    bridge_job_t *all = NULL;
    while (self->count) {
        s_key_t *key = &self->keys[self->count - 1];
        for (bridge_job_t *job = key->head, *next; job; job = next) {
            next = job->next;
            job->next = all;
            all = job;
        }
        s_remove (self, key);
    }
    return all;
}

void
bridge_held_destroy (bridge_held_t **self_p)
{
    bridge_held_t *self = *self_p;
    if (!self)
        return;
    for (bridge_job_t *job = bridge_held_take_all (self), *next; job; job = next) {
        next = job->next;
        free (job);
    }
    free (self->keys);
    free (self);
    *self_p = NULL;
}
