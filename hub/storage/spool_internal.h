/*  spool_internal - what the files of the spool share.

    The spool (see spool.h for the contract) is split by job:
      spool.c          opening and closing, appending (group commit),
                       reading, tick and the counters: the public API
      spool_segment.c  segment files: their names and listing, the
                       buffered reader that parses them, damage counting,
                       and the scan at open that recovers the state
      spool_cursor.c   the consumed position: the low-water mark over the
                       records read and done, the cursor file's writes,
                       and removing the segments consumed
    Only these files include this header; the rest of the hub uses spool.h.

    Positions are (segment number, byte offset). Three of them matter:
    the write end (w_seg, w_off: the appender's segment and how much of it
    holds whole records), the read position (r: where the next read
    starts) and the consumed position (c: persisted in the cursor file).
    The appender publishes the write end under `lock` after each write(2)
    completes, so the reader never reads past a whole record; a segment
    below w_seg is sealed and is read to its end. Nothing does I/O while
    holding `lock`.
*/
#ifndef FH_SPOOL_INTERNAL_H_INCLUDED
#define FH_SPOOL_INTERNAL_H_INCLUDED

#include "spool.h"

#include "log.h"
#include "spool_record.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CURSOR_NAME "cursor"
#define CURSOR_TMP_NAME "cursor.tmp"
#define SEG_NAME_LEN 26 /* "seg-" 16 hex ".spool" */
#define NONE UINT64_MAX

typedef struct {
    uint64_t seg, off;
} fh_sp_pos_t;

/* One record read and not yet done: where it ends, and the bytes from
   the end of the record before (damage included) to its own end. */
typedef struct {
    uint64_t seg, off, passed;
    bool done;
} fh_sp_mark_t;

/* Reads one segment through a buffer. */
typedef struct {
    int fd; /* -1 until needed */
    uint64_t seg;
    uint64_t off;     /* where the next parse starts */
    uint64_t limit;   /* how far the file may be read */
    bool sealed;      /* limit is the segment's final size */
    bool limit_known; /* for a sealed segment: limit has been measured */
    uint8_t *buf;
    size_t cap;
    uint64_t buf_pos; /* buf holds the file's bytes [buf_pos, buf_pos + buf_len) */
    size_t buf_len;
    bool in_region; /* inside a damaged region */
    uint64_t region_start;
    uint64_t passed; /* bytes moved past (records and damage) */
    uint64_t start;  /* the offset it began this segment at */
    uint64_t taken;  /* records of this segment handed out or counted damaged */
} fh_sp_reader_t;

/* Records and bytes a segment was known to hold (found at open, or
   appended), for counting what is lost when it goes missing or is cut. */
typedef struct {
    uint64_t seg, records, bytes;
} fh_sp_tally_t;
struct fh_spool {
    char *dir;
    int dir_fd;
    int lock_fd;
    uint64_t segment_bytes, max_bytes;
    fh_spool_fsync_t fsync;
    int64_t fsync_interval_ns, cursor_ns;
    uint32_t cursor_records;

    /* Shared by the appender, the reader and tick: held briefly. */
    pthread_mutex_t lock;
    uint64_t w_seg; /* the appender's segment */
    bool w_created; /* its file exists */
    uint64_t w_off; /* whole records in it */
    uint64_t *segs; /* segment files on disk, ascending */
    size_t seg_count, seg_cap;
    fh_sp_tally_t *tally; /* of the segments not yet read to their end, ascending */
    size_t tally_count, tally_cap;
    uint64_t sync_from; /* INTERVAL: first segment with unsynced appends */
    bool unsynced, dir_unsynced;

    /* The directory made again after it was removed (spool.c). */
    pthread_mutex_t dir_lock;
    atomic_bool w_reroll; /* the appender's segment is in the removed one */

    /* The appender's. */
    int w_fd;
    uint8_t *w_buf;
    size_t w_cap;
    bool w_broken; /* a failed write could not be undone: roll */
    fh_ratelimit_t w_limit;

    /* The reader's. */
    fh_sp_reader_t r;
    fanhub_bytes_t *frames;
    uint32_t frame_cap;
    fh_sp_pos_t *known; /* damage counted by the scan, in file order */
    size_t known_count, known_next, known_cap;
    fh_ratelimit_t r_limit;

    /* The cursor: the reader's consumed position, and the file. */
    pthread_mutex_t cursor_lock;
    /* The low-water mark (under cursor_lock): the records read and not
       yet done, in read order, as a ring; the consumed position moves over
       the done ones at its head. marks[mark_head] has mark mark_base. */
    fh_sp_mark_t *marks;
    size_t mark_cap, mark_head, mark_count;
    uint64_t mark_base;
    uint64_t c_seg, c_off;
    uint64_t c_written_seg, c_written_off;
    bool c_written_valid; /* the file holds c_written_* */
    uint64_t c_pending;   /* consumed records since the last write */
    int64_t c_written_ns, c_retry_ns;
    uint64_t deleted_below; /* segments below this are gone */
    fh_ratelimit_t c_limit;

    /* tick's. */
    int64_t last_sync_ns;

    atomic_uint_fast64_t records, bytes;
    /* Its counters, in the consumer's figures' shape (fh_spool_tally),
       any thread (fh_count_add): spool_corrupt, spool_lost (records lost;
       a segment of unknown content: 1), spool_cursor_errors (cursor
       writes that failed), spool_fsyncs (fdatasync calls on segments). */
    fh_consumer_counts_t counts;
    uint64_t first_w_seg; /* segments from here on were written by this run */
    uint64_t max_seq;     /* the highest seq of the records found at open */
};

/* spool_cursor.c: syncs the directory, so that names created, renamed or
   removed in it survive a crash. 0, or -1 (logged). */
int fh_sp_sync_dir (fh_spool_t *self);

/* Writes segment seg's file name (SEG_NAME_LEN + 1 bytes) to name.
   Inline: every spool file names segments, and they call one way,
   spool.c -> spool_segment.c -> spool_cursor.c (test_layout). */
static inline void
fh_sp_seg_name (char *name, uint64_t seg)
{
    snprintf (name, SEG_NAME_LEN + 1, "seg-%016" PRIx64 ".spool", seg);
}

/* spool_segment.c */

void fh_sp_reader_init (fh_sp_reader_t *r, uint64_t seg, uint64_t off);
void fh_sp_reader_free (fh_sp_reader_t *r);
/* Moves r past damage, counting it, to the next message record: 1 with
   its payload and size, 0 at the reader's limit, -1 on an I/O error. */
int fh_sp_step (fh_spool_t *self, fh_sp_reader_t *r, bool scanning, const uint8_t **payload,
                uint32_t *payload_len, size_t *size);
/* Adds seg to the list of segment files. 0, or -1 when out of memory. */
int fh_sp_segs_push (fh_spool_t *self, uint64_t seg);
/* At open: reads the cursor, lists and scans the segments, counts what
   was lost, and sets the write, read and consumed positions. 0, or -1
   with the message in err. */
int fh_sp_recover (fh_spool_t *self, char *err, size_t errlen);
/* Adds to the tally of segment seg (the last one, or a new last one).
   Under lock. 0, or -1 when out of memory (then a loss of it goes
   uncounted). */
int fh_sp_tally_add (fh_spool_t *self, uint64_t seg, uint64_t records, uint64_t bytes);
/* The reader leaves segment r->seg: what its tally holds beyond what the
   reader took from it was lost (missing, cut short, in a damaged region);
   counted and taken out of the records and bytes waiting. Returns how
   many, for the caller's log line. */
uint64_t fh_sp_tally_leave (fh_spool_t *self);

/* spool_cursor.c */

/* Reads the cursor file: 1 and the position, 0 when there is none, -1
   with the message in err. */
int fh_sp_cursor_load (fh_spool_t *self, uint64_t *seg, uint64_t *off, char *err, size_t errlen);
/* Makes cursor.tmp, the block the next cursor write fills. */
void fh_sp_cursor_reserve (fh_spool_t *self);
/* The consumed position differs from the one written. Under cursor_lock. */
bool fh_sp_cursor_dirty (const fh_spool_t *self);
/* Writes the cursor; on a full disk frees consumed segments to make room.
   0, or -1. Under cursor_lock. */
int fh_sp_cursor_write_making_room (fh_spool_t *self);
/* Deletes the segments below the written cursor's. Under cursor_lock. */
void fh_sp_delete_consumed (fh_spool_t *self);
/* Appends a mark for a record just read, ending at (seg, off). Under
   cursor_lock. 0, or -1 when out of memory. */
int fh_sp_mark_push (fh_spool_t *self, uint64_t seg, uint64_t off, uint64_t passed, uint64_t *mark);
/* Damage the reader skipped with no record after it: a mark done already. */
void fh_sp_mark_skipped (fh_spool_t *self, fh_sp_reader_t *r);

#endif
