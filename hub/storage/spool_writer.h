/*  spool_writer - a spool's appender on a thread of its own, behind a
    bounded hand-off, so that whoever spills never waits for the disk.

    The thread that spills (in the hub, the enqueuer, which reads the bus
    for every consumer) hands items over with fh_spool_writer_put: a slot
    in a ring, without a lock while it has room, and a wake-up only when
    the writer sleeps.
    The writer takes everything handed over so far, at most `max_items`,
    appends it to the spool as one group commit (fh_spool_append_batch:
    few write(2) calls, and with fsync: always one fdatasync for all of
    them), and only then are the records readable. So one fdatasync
    covers every message that arrived since the last pass: the faster
    the messages come, the more each sync carries. A pass that synced is
    followed by the next FH_SPOOL_WRITER_PACE_NS after its start at the
    earliest (sooner when the hand-off is half full or a flush waits), so
    syncs cost a bounded share of a CPU whatever the message rate.

    Order. Items are written in the order they were handed over, and
    fh_spool_writer_pending counts them until their fate is known; an item
    leaves that count only after its record counts in fh_spool_records.
    So a reader that reads fh_spool_writer_pending first, then
    fh_spool_records, never sees a spilled message in neither.

    What the caller gets back, on the writer's thread: `describe` (what to
    write for an item), `written` (its fate: stored, or not, and why) and
    `wrote` (after each pass: there may be more to read). The caller keeps
    an item's frames alive until `written`.

    Bounds. The hand-off holds at most max_items items and max_bytes bytes
    (their frames'; one item larger than max_bytes is taken when the
    hand-off is empty); a pass takes them out, so at most twice that waits
    in memory. When it is full, fh_spool_writer_put answers -1 (or, with
    wait, waits for room): what to do then is the caller's policy.

    Threads. One thread at a time puts (the caller serialises them);
    fh_spool_writer_pending from any thread; flush from any thread but the
    writer's; destroy once, with no put running. While a writer runs, it is
    the spool's only appender.
*/
#ifndef FH_SPOOL_WRITER_H_INCLUDED
#define FH_SPOOL_WRITER_H_INCLUDED

#include "spool.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The hand-off's default bounds (the consumer takes the larger of
   queue.capacity and FH_SPOOL_WRITER_MIN_ITEMS items). */
#define FH_SPOOL_WRITER_MIN_ITEMS 16384
#define FH_SPOOL_WRITER_MAX_BYTES (64u * 1024 * 1024)
/* After a pass that synced, the next starts this long after it at the
   earliest, unless the hand-off is half full or a flush waits (see
   spool_writer.c, "Pacing"). */
#define FH_SPOOL_WRITER_PACE_NS (10 * 1000 * 1000)

typedef struct fh_spool_writer fh_spool_writer_t;

typedef struct {
    /* Fills entry->seq, received_wall_ns and frames (frame_count of them,
       as given to put, into the array `frames`, which entry->frames
       already points at). */
    void (*describe) (void *arg, void *item, fh_spool_entry_t *entry);
    /* The item's fate: rc 0 (in the spool, readable, synced as the fsync
       policy says), FH_SPOOL_FULL, or -1 with error an errno value. The
       writer forgets the item after this call. */
    void (*written) (void *arg, void *item, int rc, int error);
    /* After a pass, once pending no longer counts its items. May be NULL. */
    void (*wrote) (void *arg);
    void *arg;
} fh_spool_writer_ops_t;

/* Starts the writer of spool (which it does not own). NULL with one line
   in err when out of memory or no thread can be started. */
fh_spool_writer_t *fh_spool_writer_new (fh_spool_t *spool, size_t max_items, uint64_t max_bytes,
                                        const fh_spool_writer_ops_t *ops, char *err, size_t errlen);
/* Writes everything handed over (each gets its `written`), stops the
   thread and joins it. Safe with NULL and twice; nulls *self_p. */
void fh_spool_writer_destroy (fh_spool_writer_t **self_p);

/* Hands item over (frame_count frames, `bytes` bytes in all): 0; -1 when
   the hand-off is full, nothing taken; with wait, waits for room and
   always takes it. */
int fh_spool_writer_put (fh_spool_writer_t *self, void *item, uint32_t frame_count, uint64_t bytes,
                         bool wait);
/* True when a put of `bytes` would be taken now. With one putter, it
   stays true until that put (the writer only makes room). */
bool fh_spool_writer_room (fh_spool_writer_t *self, uint64_t bytes);
/* Any thread: items handed over whose `written` has not returned yet. */
uint64_t fh_spool_writer_pending (fh_spool_writer_t *self);
/* Waits until everything handed over so far has been written (or failed). */
void fh_spool_writer_flush (fh_spool_writer_t *self);
/* Any thread: the pace after a pass that synced (default
   FH_SPOOL_WRITER_PACE_NS; 0: none, the next pass starts at once). */
void fh_spool_writer_set_pace (fh_spool_writer_t *self, int64_t pace_ns);
/* Any thread: the passes that wrote something (group commits). */
uint64_t fh_spool_writer_passes (fh_spool_writer_t *self);

#endif
