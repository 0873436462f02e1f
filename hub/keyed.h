/*  keyed - the per-key scheduler of a consumer's worker pool.

    With `workers: N` and `order_by:` a consumer's messages are grouped by
    their ordering key (see order_key.h). This module decides which message
    a free worker starts next, with the semantics of xapi's work queues and
    Gitpod's event worker pool:

    - Messages of one key are started one at a time, in arrival order:
      while a key's message is taken (between fh_keyed_take and
      fh_keyed_release or fh_keyed_retry) no other message of that key is
      handed out, and a retried message goes back to the head of its key,
      so it is the next one of that key to start.
    - Messages of different keys are independent: any number of keys may
      have a message taken at once (the caller's N workers bound it).
    - Keys take turns, one message per turn. Keys with a message ready to
      start wait in a FIFO ring; take serves the key at its head, and a key
      that still has messages when its message is done goes to the tail.
      So a key that becomes ready waits for at most one message of each
      key ahead of it in the ring, however long their backlogs: one hot key
      with 100,000 queued messages delays a cold key by at most one of its
      messages (and not at all while another worker is free, since the hot
      key can only have one message running).
    - Every pushed message is handed out exactly once, or returned to the
      caller exactly once (replaced by coalescing, or released by
      fh_keyed_destroy).
    - A key costs nothing when idle: once a key has no queued message and
      none taken or delayed, its entry leaves the table. At most
      FH_KEYED_SPARE_ENTRIES entries and FH_KEYED_SPARE_NODES queue nodes
      are kept for reuse, so the steady state allocates nothing per
      message; fh_keyed_destroy frees those too.
    - Coalescing (fh_keyed_new (true); xapi's push_with_coalesce): a
      message pushed for a key that has a queued message not yet started
      replaces that message, in its place; the replaced one is handed back
      to the caller. A message that was started (the one taken now, or a
      retried one waiting at the head of its key) is never replaced. So a
      coalescing key holds at most one message that was never started.

    A pure data structure: no threads, no locks, no clock. Times are
    CLOCK_MONOTONIC nanoseconds passed in by the caller (so tests drive a
    fake clock), and the caller serializes every call, typically under the
    one mutex its workers share. Costs: push, take and done are O(1)
    (amortized: the tables grow and shrink by doubling), retry and a key
    leaving its delay are O(log d) for d delayed keys.
*/
#ifndef FH_KEYED_H_INCLUDED
#define FH_KEYED_H_INCLUDED

#include "message.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Free entries and nodes kept for reuse (bounded memory when idle). */
#define FH_KEYED_SPARE_ENTRIES 64
#define FH_KEYED_SPARE_NODES 1024

typedef struct fh_keyed fh_keyed_t;
/* The key of a taken message: valid from fh_keyed_take until the
   fh_keyed_release or fh_keyed_retry that ends it. */
typedef struct fh_keyed_slot fh_keyed_slot_t;

/* A scheduler, coalescing or not. NULL when out of memory. */
fh_keyed_t *fh_keyed_new (bool coalesce);
/* What the owner does with a message handed back by purge or destroy
   (fh_msg_release with the worker's fh_handled_t, typically). */
typedef void (fh_keyed_release_fn) (fh_msg_t *msg, void *arg);

/* Frees it, handing every queued message (retried ones included) to
   release (with arg), unless release is NULL. Messages taken and not yet done belong
   to whoever took them; their slots die here, so call it only once no
   worker will call fh_keyed_release or fh_keyed_retry again. Safe with NULL
   and twice. */
void fh_keyed_destroy (fh_keyed_t **self_p, fh_keyed_release_fn *release, void *arg);

/* Queues msg under key (key_size bytes, any bytes; copied when the key is
   new). Returns 0, with *replaced set to the message msg replaced when
   coalescing (the caller releases and counts it) or else to NULL; or -1
   when out of memory, with msg not queued and still the caller's. */
int fh_keyed_push (fh_keyed_t *self, const void *key, size_t key_size, fh_msg_t *msg,
                   fh_msg_t **replaced);

/* The next message to start, or NULL when none is ready. It is the head
   message of the key at the head of the ready ring; that key is busy, and
   *slot names it, until fh_keyed_release or fh_keyed_retry. First moves every
   delayed key whose not_before is <= now_ns to the tail of the ready ring
   (earliest first). When next_due_ns is not NULL it gets the earliest
   not_before of the keys still delayed, or INT64_MAX if none: a worker
   that got NULL sleeps until then, or until a push. */
fh_msg_t *fh_keyed_take (fh_keyed_t *self, int64_t now_ns, fh_keyed_slot_t **slot,
                         int64_t *next_due_ns);

/* Releases the key of the message taken from slot, which is done
   (whatever the outcome; fh_keyed_retry when it is to be tried again).
   The key is free again: if it has more queued it goes to the tail of the ready
   ring (one message per turn); if not, its state is freed. */
void fh_keyed_release (fh_keyed_t *self, fh_keyed_slot_t *slot);

/* The message taken from slot must be tried again: it goes back to the
   head of its key's queue, and the key stays blocked (none of its
   messages starts) until not_before_ns; at the first take from then on it
   joins the tail of the ready ring. Other keys are unaffected. Never
   fails: the message keeps the node it had. */
void fh_keyed_retry (fh_keyed_t *self, fh_keyed_slot_t *slot, int64_t not_before_ns);

/* How many times the message now taken from slot was retried before
   (0 on its first attempt), for a retry limit. */
unsigned fh_keyed_slot_retries (const fh_keyed_slot_t *slot);

/* Figures, read under the caller's lock like everything else. */
/* Messages queued and not taken: new, and retried ones waiting. */
size_t fh_keyed_queued (const fh_keyed_t *self);
/* Messages taken and not yet done or retried (in flight). */
size_t fh_keyed_busy (const fh_keyed_t *self);
/* Keys waiting for a retry's not_before (the tests' view of the delay
   heap, like the two below: they check what the guarantees above say). */
size_t fh_keyed_delayed (const fh_keyed_t *self);
/* Keys with state (queued, busy or delayed): keys_active. */
size_t fh_keyed_keys (const fh_keyed_t *self);
/* The largest number of queued messages of one key, now (O(1)). */
size_t fh_keyed_max_key_backlog (const fh_keyed_t *self);
/* The highest fh_keyed_max_key_backlog ever reached: key_backlog_max. */
size_t fh_keyed_key_backlog_high (const fh_keyed_t *self);
/* Key entries and queue nodes allocated, spares included: for tests of
   "idle keys cost nothing". */
size_t fh_keyed_live_entries (const fh_keyed_t *self);
size_t fh_keyed_live_nodes (const fh_keyed_t *self);

#endif
