/*  spool - a consumer's disk queue, for the `spill` overflow policy.

    Lives in one directory per consumer (state_dir/CONSUMER/):

        seg-%016llx.spool   segment files, numbered upwards, never reused;
                            append-only sequences of records
                            (spool_record.h: 16-byte self-checking header,
                            CRC-32C of the payload, one message each)
        cursor              the consumed position: one line,
                            "fanhub-spool-cursor 1 SEG OFFSET CRC\n", SEG
                            16 hex digits, OFFSET decimal, CRC the CRC-32C
                            of the text before it, 8 hex digits; replaced
                            atomically (cursor.tmp, fsync per policy, rename)
        lock                held with flock while open: a second open
                            (by any process) fails, naming the file

    The spool is a FIFO of its own: records come back in append order. The
    caller keeps it in order with its memory queue.

    Threads. Exactly one thread appends (fh_spool_append, fh_spool_append_batch:
    in the hub, the consumer's spool writer, spool_writer.h) while exactly one
    other thread reads (fh_spool_read), at the same time; fh_spool_done and
    fh_spool_consumed may be called from any thread. fh_spool_tick may be called from any one thread; the counters
    from any thread. open and close run with neither of the others active.
    Appending never waits for the reader's disk I/O, nor the reader for the
    appender's: they share a mutex held only to exchange positions. An
    append is one write(2) of the whole record, plus fdatasync(2) in
    FSYNC_ALWAYS. A batch is a group commit: its records go out in as few
    write(2) calls as fit (1 MiB each), then one fdatasync in FSYNC_ALWAYS
    (one more at each segment switch), and only then do they become
    readable, all at once.

    Start-up. fh_spool_open reads every unconsumed record once (the exact
    count of fh_spool_records needs it; this costs a read of the spool's
    bytes, at disk speed). It deletes segments wholly before the cursor;
    truncates a segment whose end holds a torn or damaged record (a write
    cut by a crash); and counts in fh_spool_corrupt, and in *corrupt_found,
    every damaged record or region. Losses count in fh_spool_lost (see
    there): a segment missing from the cursor's on, emptied or cut below
    the cursor. A cursor naming a segment past the last one there is (and
    past the one the writer would start) is not believed: the segments are
    read from the start, not deleted. Anything else named like a segment
    (a directory) is ignored with a warning, and its number never used. Damage in the middle of a segment is
    left in place and skipped by the reader, which counts nothing twice.
    Segments are not appended to after a restart: the writer starts a new
    one.

    Damage while reading. A record whose header verifies but whose payload
    does not (or is not a well-formed message) is skipped and counted as
    one. Bytes that are no record (a damaged header, a damaged length) are
    skipped up to the next position where a record verifies, and counted as
    one region. Nothing damaged is ever delivered, and every intact record
    after the damage is.

    Durability. After fh_spool_append answers 0 the record is in the
    kernel's page cache: a kill -9 of the hub (any crash of the process)
    loses nothing the spool accepted. What a crash of the whole machine or
    a power cut loses depends on `fsync`:
      NEVER     whatever the kernel had not yet written back (by default
                up to ~30 s of appends, dirty_expire_centisecs);
      INTERVAL  the appends of the last fsync_interval_ms (plus the time to
                the next fh_spool_tick): tick syncs every segment written
                since the last sync, and the directory after a new segment;
      ALWAYS    nothing that fh_spool_append answered 0 for (fdatasync
                after each record or batch, before the reader can see it;
                the directory after each new segment).
    A record half-written when the machine stopped is found at start-up,
    truncated and counted, never delivered.

    What can repeat. The cursor records the consumed position: the end of
    the contiguous prefix of records declared done (fh_spool_done, from
    any thread, in any order; fh_spool_consumed declares all read ones),
    a low-water mark that never passes a record read but not done. It is written at
    every segment switch, on close, as soon as cursor_records records
    (default 1000) were consumed since it was last written, and at the
    first fh_spool_consumed or fh_spool_tick that comes cursor_ms (default
    1000 ms) or more after the last write. So:
      - clean close and open: nothing lost, nothing repeated. Records read
        but not yet declared consumed are delivered again (they were not
        done);
      - kill -9: the records consumed since the last cursor write are
        delivered again: fewer than cursor_records, and only those consumed
        in the last cursor_ms + P before the kill, P being the longest gap
        between calls of fh_spool_consumed or fh_spool_tick (tick every
        few hundred ms keeps P small). Nothing is lost;
      - machine crash: as kill -9, except that the newest cursor may not
        have reached the disk (ALWAYS syncs the file and its directory,
        INTERVAL the file only, NEVER neither); then an older one (or none:
        reading starts at the oldest segment) applies, and what was
        consumed since then repeats (at most the segments still on disk).
    Nothing before a deleted segment ever repeats: the cursor names a later
    segment before the earlier ones are deleted.

    What can be lost: only messages that never reached fh_spool_append (in
    the caller's memory), and after a machine crash what the fsync mode
    above allows. What is taken from the directory by hand while open (a
    segment deleted or cut, the directory removed: it is made again, by
    the next tick, append to a new segment or read) is counted in
    fh_spool_lost as the reader meets it, and the records and bytes
    waiting say so.
*/
#ifndef FH_SPOOL_H_INCLUDED
#define FH_SPOOL_H_INCLUDED

#include "fanhub/consumer.h"

#include "consumer_counts.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FH_SPOOL_FULL 1 /* fh_spool_append: max_bytes reached, not stored */

#define FH_SPOOL_DEFAULT_SEGMENT_BYTES (64u * 1024 * 1024)
#define FH_SPOOL_DEFAULT_FSYNC_INTERVAL_MS 1000
#define FH_SPOOL_DEFAULT_CURSOR_RECORDS 1000
#define FH_SPOOL_DEFAULT_CURSOR_MS 1000
#define FH_SPOOL_LOCK_NAME "lock" /* in the spool directory; flock(2) LOCK_EX while open */

typedef struct fh_spool fh_spool_t;

typedef enum {
    FH_SPOOL_FSYNC_NEVER,
    FH_SPOOL_FSYNC_INTERVAL,
    FH_SPOOL_FSYNC_ALWAYS
} fh_spool_fsync_t;

/* A zeroed struct is valid: every 0 below means the default. */
typedef struct {
    uint64_t segment_bytes;    /* start a new segment when a record would
                                  take this one past it; 0 = 64 MiB */
    uint64_t max_bytes;        /* cap on fh_spool_bytes; 0 = no cap */
    fh_spool_fsync_t fsync;    /* default NEVER */
    int64_t fsync_interval_ms; /* for INTERVAL; 0 = 1000 */
    uint32_t cursor_records;   /* write the cursor after this many consumed
                                  records; 0 = 1000 */
    int64_t cursor_ms;         /* ... or this long after the last write;
                                  0 = 1000 */
} fh_spool_options_t;

typedef struct { /* one message as stored */
    uint64_t seq;
    int64_t received_wall_ns;     /* the hub's receive time, wall clock */
    uint32_t frame_count;         /* >= 2 */
    const fanhub_bytes_t *frames; /* valid until the next read or close */
    uint64_t mark;                /* for fh_spool_done; never 0 */
    bool this_run;                /* appended since open (not found at open) */
} fh_spool_record_t;

/* Opens the spool in dir, creating dir (and missing parents, mode 0750)
   when missing; takes its lock; scans and repairs it (see above). Sets
   *corrupt_found (if not NULL) to the damaged records and regions found.
   NULL on error, with one line in err naming the file and the reason. */
fh_spool_t *fh_spool_open (const char *dir, const fh_spool_options_t *options,
                           uint64_t *corrupt_found, char *err, size_t errlen);
/* Syncs (unless NEVER), writes the cursor (the consumed position), closes.
   Safe with NULL and twice; nulls *self_p. */
void fh_spool_close (fh_spool_t **self_p);
/* The same; -1 when the cursor could not be written (logged, with the
   count), and then *repeated (if not NULL) is the number of done records
   the next run will deliver again; they are added to
   fh_spool_unsaved_total. 0 otherwise. */
int fh_spool_close_checked (fh_spool_t **self_p, uint64_t *repeated);
/* Any thread: the sum of *repeated over every failed close of the process
   (a clean stop that is not clean exits non-zero with it). */
uint64_t fh_spool_unsaved_total (void);
/* The highest sequence number of the records found unconsumed at open
   (0 when none): the hub numbers new messages after it, so that a
   message's seq stays unique within a run, spooled copies included. */
uint64_t fh_spool_max_seq (fh_spool_t *self);
/* Any thread: cursor writes that failed since open (each is tried again:
   on the next fh_spool_done or tick after cursor_ms). */
uint64_t fh_spool_cursor_errors (fh_spool_t *self);

/* Appender. Stores one message at the end: 0; FH_SPOOL_FULL when it would
   take fh_spool_bytes past max_bytes (nothing stored; the caller counts
   the drop); -1 with errno on error (nothing stored; logged, naming the
   file): EMSGSIZE for a message over 1 GiB, EINVAL for frame_count < 2, or
   the error of write(2), open(2), fdatasync(2). */
int fh_spool_append (fh_spool_t *self, uint64_t seq, int64_t received_wall_ns,
                     const fanhub_bytes_t *frames, uint32_t frame_count);

/* One message of a batch. */
typedef struct {
    uint64_t seq;
    int64_t received_wall_ns;
    const fanhub_bytes_t *frames;
    uint32_t frame_count;
    int rc;    /* set by the batch: what fh_spool_append would have answered */
    int error; /* the errno value when rc is -1 */
} fh_spool_entry_t;

/* Appender. Stores entries[0..count-1] at the end, in order, as one group
   commit (see Threads). Each entry's rc says what became of it, as for
   fh_spool_append: 0, FH_SPOOL_FULL, or -1 (EINVAL, EMSGSIZE: that entry
   only; an I/O error fails the entries not yet committed and every later
   one of the batch, logged once). Returns how many were stored. */
size_t fh_spool_append_batch (fh_spool_t *self, fh_spool_entry_t *entries, size_t count);
/* Any thread: fdatasync(2) calls on segments since open (ALWAYS: one per
   batch, one per segment switch; INTERVAL: one per segment per sync). */
uint64_t fh_spool_syncs (fh_spool_t *self);

/* Reader. The oldest unread record: 1 and *out filled; 0 when nothing is
   unread (now: appends may follow); -1 with errno on an I/O error (logged,
   naming the file; the read may be tried again). */
int fh_spool_read (fh_spool_t *self, fh_spool_record_t *out);
/* Any thread. The record of `mark` (from fh_spool_read) is done: the
   consumed position moves over the contiguous prefix of done records (a
   low-water mark, never past a record read but not yet done), finished
   segments are deleted, the cursor is written when due. Each mark once. */
void fh_spool_done (fh_spool_t *self, uint64_t mark);
/* Any thread. Everything read so far is done (fh_spool_done of every
   outstanding mark). */
void fh_spool_consumed (fh_spool_t *self);
/* Any thread. Records read and not yet done. */
uint64_t fh_spool_undone (fh_spool_t *self);
/* Any thread. Records read and not yet passed by the consumed position
   (done or not): what a restart would read again. */
uint64_t fh_spool_window (fh_spool_t *self);

/* Any thread. Records appended (or found at open) and not yet read. */
uint64_t fh_spool_records (fh_spool_t *self);
/* Any thread. Bytes of records not yet consumed (what max_bytes caps).
   The disk holds at most one segment more: the consumed part of the
   segment being read is deleted with it. */
uint64_t fh_spool_bytes (fh_spool_t *self);
/* Any thread. Damaged records and regions found since open (those found
   by open's scan included), each counted once. */
uint64_t fh_spool_corrupt (fh_spool_t *self);
/* Any thread. Records lost since open (those lost before it included):
   in segments missing or cut short, at open or while reading (a segment
   lost before open counts once: how many records it held is not known),
   and every record that is neither read nor counted as damaged when a
   segment ends early. Each is logged. */
uint64_t fh_spool_lost (fh_spool_t *self);
/* Any thread. The spool's counters (corrupt, lost, cursor errors,
   fsyncs) in the shape of a consumer's figures (consumer_counts.h), for a
   snapshot to add in by the registry's rows; read with fh_count_read. */
const fh_consumer_counts_t *fh_spool_tally (fh_spool_t *self);

/* Any one thread, every few hundred ms, with CLOCK_MONOTONIC ns: in
   INTERVAL, syncs what was appended once fsync_interval_ms has passed since
   the last sync; in every mode, writes a cursor that is due by time. 0, or
   -1 with errno when a sync or the cursor write failed (logged). */
int fh_spool_tick (fh_spool_t *self, int64_t now_ns);

/* For tests: closes the files and frees everything without syncing or
   writing the cursor, as if the process had been killed. */
void fh_spool_abandon (fh_spool_t **self_p);

#endif
