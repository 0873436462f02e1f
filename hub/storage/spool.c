/*  spool - a consumer's disk queue. See spool.h for the contract.

    Positions are (segment number, byte offset). Three of them matter:
    the write end (w_seg, w_off: the appender's segment and how much of it
    holds whole records), the read position (r: where the next read
    starts) and the consumed position (c: persisted in the cursor file).
    The appender publishes the write end under `lock` after each write(2)
    completes, so the reader never reads past a whole record; a segment
    below w_seg is sealed and is read to its end. Nothing does I/O while
    holding `lock`.

    Segments are numbered upwards and a number is never reused: after a
    restart the writer starts at one past the highest segment or cursor
    segment, so a stale cursor can never point into a newer file.

    Damage is counted once. The start-up scan and the reader parse the
    same bytes from the same position with the deterministic
    fh_record_parse, so they meet the same damaged records and regions at
    the same offsets: the scan counts them and remembers where they start
    (`known`), and the reader does not count those again.
*/
#include "spool.h"

#include "fs.h"

#include "clock.h"
#include "crc32c.h"
#include "log.h"
#include "spool_record.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_CHUNK (256u * 1024)
#define WRITE_CHUNK (1u << 20) /* an append pass writes at most this much at once */
#define CURSOR_NAME "cursor"
#define CURSOR_TMP_NAME "cursor.tmp"
#define LOCK_NAME FH_SPOOL_LOCK_NAME
#define CURSOR_TAG "fanhub-spool-cursor 1 "
#define SEG_NAME_LEN 26 /* "seg-" 16 hex ".spool" */
#define NONE UINT64_MAX

typedef struct {
    uint64_t seg, off;
} s_pos_t;

/* One record read and not yet done: where it ends, and the bytes from
   the end of the record before (damage included) to its own end. */
typedef struct {
    uint64_t seg, off, passed;
    bool done;
} s_mark_t;

/* Reads one segment through a buffer. */
typedef struct {
    int fd;            /* -1 until needed */
    uint64_t seg;
    uint64_t off;      /* where the next parse starts */
    uint64_t limit;    /* how far the file may be read */
    bool sealed;       /* limit is the segment's final size */
    bool limit_known;  /* for a sealed segment: limit has been measured */
    uint8_t *buf;
    size_t cap;
    uint64_t buf_pos;  /* buf holds the file's bytes [buf_pos, buf_pos + buf_len) */
    size_t buf_len;
    bool in_region;    /* inside a damaged region */
    uint64_t region_start;
    uint64_t passed;   /* bytes moved past (records and damage) */
} s_reader_t;

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
    uint64_t w_seg;       /* the appender's segment */
    bool w_created;       /* its file exists */
    uint64_t w_off;       /* whole records in it */
    uint64_t *segs;       /* segment files on disk, ascending */
    size_t seg_count, seg_cap;
    uint64_t sync_from;   /* INTERVAL: first segment with unsynced appends */
    bool unsynced, dir_unsynced;

    /* The appender's. */
    int w_fd;
    uint8_t *w_buf;
    size_t w_cap;
    bool w_broken;        /* a failed write could not be undone: roll */
    fh_ratelimit_t w_limit;

    /* The reader's. */
    s_reader_t r;
    fanhub_bytes_t *frames;
    uint32_t frame_cap;
    s_pos_t *known;       /* damage counted by the scan, in file order */
    size_t known_count, known_next, known_cap;
    fh_ratelimit_t r_limit;

    /* The cursor: the reader's consumed position, and the file. */
    pthread_mutex_t cursor_lock;
    /* The low-water mark (under cursor_lock): the records read and not
       yet done, in read order, as a ring; the consumed position moves over
       the done ones at its head. marks[mark_head] has mark mark_base. */
    s_mark_t *marks;
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

    atomic_uint_fast64_t records, bytes, corrupt;
    atomic_uint_fast64_t cursor_errors; /* cursor writes that failed */
    atomic_uint_fast64_t syncs;         /* fdatasync calls on segments */
    uint64_t first_w_seg; /* segments from here on were written by this run */
    uint64_t max_seq;     /* the highest seq of the records found at open */
};

/* Done records whose cursor no clean close could write, over every spool
   of the process: what the next run will deliver again. */
static atomic_uint_fast64_t s_unsaved_total;

static void
s_seg_name (char *name, uint64_t seg)
{
    snprintf (name, SEG_NAME_LEN + 1, "seg-%016" PRIx64 ".spool", seg);
}

static bool
s_seg_parse (const char *name, uint64_t *seg)
{
    if (strlen (name) != SEG_NAME_LEN || strncmp (name, "seg-", 4) != 0
        || strcmp (name + 20, ".spool") != 0)
        return false;
    uint64_t value = 0;
    for (int i = 4; i < 20; i++) {
        char c = name[i];
        int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (digit < 0)
            return false;
        value = value << 4 | (uint64_t) digit;
    }
    *seg = value;
    return true;
}

static void
s_sub_saturating (atomic_uint_fast64_t *counter, uint64_t amount)
{
    uint_fast64_t old = atomic_load (counter);
    while (!atomic_compare_exchange_weak (counter, &old, old > amount ? old - amount : 0))
        ;
}

/* Syncs the directory, so that names created, renamed or removed in it
   survive a machine crash. */
static int
s_sync_dir (fh_spool_t *self)
{
    char err[512];
    if (fh_fs_sync_dir (self->dir, self->dir_fd, err, sizeof err) == 0)
        return 0;
    int saved = errno;
    fh_error ("%s", err);
    errno = saved;
    return -1;
}

/* ---------------------------------------------------------------- reader */

static void
s_reader_init (s_reader_t *r, uint64_t seg, uint64_t off)
{
    memset (r, 0, sizeof *r);
    r->fd = -1;
    r->seg = seg;
    r->off = off;
}

static void
s_reader_free (s_reader_t *r)
{
    if (r->fd >= 0)
        close (r->fd);
    r->fd = -1;
    free (r->buf);
    r->buf = NULL;
    r->cap = r->buf_len = 0;
}

/* Parses at r->off, reading the file up to r->limit as needed. Never
   returns FH_RECORD_NEED. -1 with errno when a read fails. */
static int
s_parse_next (s_reader_t *r, fh_record_status_t *status, size_t *size,
              const uint8_t **payload, uint32_t *payload_len)
{
    for (;;) {
        const uint8_t *p = NULL;
        size_t avail = 0;
        uint64_t buf_end = r->buf_pos + r->buf_len;
        if (r->off >= r->buf_pos && r->off < buf_end) {
            p = r->buf + (r->off - r->buf_pos);
            avail = (size_t) (buf_end - r->off);
        }
        if (r->off >= r->limit)
            avail = 0;
        else if (avail > r->limit - r->off)
            avail = (size_t) (r->limit - r->off);
        bool at_end = r->off + avail >= r->limit;
        *status = fh_record_parse (p, avail, at_end, size, payload, payload_len);
        if (*status != FH_RECORD_NEED)
            return 0;
        /* Refill from r->off: at least what the parse asked for (it is at
           most a verified header's record, so bounded), at most what may
           be read. */
        size_t want = *size > READ_CHUNK ? *size : READ_CHUNK;
        if (want > r->limit - r->off)
            want = (size_t) (r->limit - r->off);
        if (want > r->cap) {
            free (r->buf);
            r->buf = malloc (want);
            r->buf_len = 0;
            if (!r->buf) {
                r->cap = 0;
                errno = ENOMEM;
                return -1;
            }
            r->cap = want;
        }
        size_t got = 0;
        while (got < want) {
            ssize_t n = pread (r->fd, r->buf + got, want - got, (off_t) (r->off + got));
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                r->buf_len = 0;
                return -1;
            }
            if (n == 0)
                break;
            got += (size_t) n;
        }
        r->buf_pos = r->off;
        r->buf_len = got;
        if (got < want)
            r->limit = r->off + got; /* shorter than it was: someone truncated it */
    }
}

static bool
s_pos_less (s_pos_t a, s_pos_t b)
{
    return a.seg < b.seg || (a.seg == b.seg && a.off < b.off);
}

/* Counts damage starting at (seg, off) once: the scan records it, the
   reader skips what the scan recorded. `what` names it for the log; NULL
   for a torn end, which the scan reports as it cuts it. */
static void
s_damage (fh_spool_t *self, uint64_t seg, uint64_t off, bool scanning, const char *what)
{
    s_pos_t pos = {seg, off};
    if (scanning) {
        if (self->known_count == self->known_cap) {
            size_t cap = self->known_cap ? self->known_cap * 2 : 16;
            s_pos_t *known = realloc (self->known, cap * sizeof *known);
            if (known) {
                self->known = known;
                self->known_cap = cap;
            }
        }
        /* Out of memory only means the reader may count it again. */
        if (self->known_count < self->known_cap)
            self->known[self->known_count++] = pos;
    }
    else {
        while (self->known_next < self->known_count
               && s_pos_less (self->known[self->known_next], pos))
            self->known_next++;
        if (self->known_next < self->known_count && self->known[self->known_next].seg == seg
            && self->known[self->known_next].off == off) {
            self->known_next++;
            return;
        }
    }
    atomic_fetch_add (&self->corrupt, 1);
    if (what) {
        char name[SEG_NAME_LEN + 1];
        s_seg_name (name, seg);
        fh_log_limited (&self->r_limit, FANHUB_LOG_WARNING,
                       "%s/%s: %s at offset %" PRIu64 ": skipped", self->dir, name, what, off);
    }
}

/* Moves r past damage, counting it, to the next message record: 1 with r
   at it (not yet passed) and *size its length; 0 at the end of what may
   be read; -1 with errno on a read error. At the end, r->region_start is
   where damage running to the end began, or NONE. */
static int
s_step (fh_spool_t *self, s_reader_t *r, bool scanning, const uint8_t **payload,
        uint32_t *payload_len, size_t *size)
{
    for (;;) {
        fh_record_status_t status;
        if (s_parse_next (r, &status, size, payload, payload_len) < 0)
            return -1;
        uint64_t seq;
        int64_t wall;
        uint32_t frames;
        switch (status) {
        case FH_RECORD_OK:
            if (fh_record_decode_message (*payload, *payload_len, &seq, &wall, &frames,
                                          NULL, 0)
                && frames >= 2) {
                r->in_region = false;
                return 1;
            }
            /* Verified but not a message: damaged all the same. */
            s_damage (self, r->seg, r->off, scanning, "malformed message record");
            r->in_region = false;
            break;
        case FH_RECORD_BAD:
            s_damage (self, r->seg, r->off, scanning, "record with a bad checksum");
            r->in_region = false;
            break;
        case FH_RECORD_GARBAGE:
            if (!r->in_region) {
                s_damage (self, r->seg, r->off, scanning, "damaged region");
                r->in_region = true;
                r->region_start = r->off;
            }
            break;
        case FH_RECORD_TORN:
            if (*size == 0 && !r->in_region) {
                r->region_start = NONE;
                return 0;
            }
            if (!r->in_region) {
                s_damage (self, r->seg, r->off, scanning, scanning ? NULL : "torn record");
                r->region_start = r->off;
            }
            r->in_region = false;
            r->off += *size;
            r->passed += *size;
            return 0;
        case FH_RECORD_NEED:
            assert (false);
            break;
        }
        r->off += *size;
        r->passed += *size;
    }
}

/* ---------------------------------------------------------------- cursor */

/* Reads the cursor file: 1 and the position, 0 when there is none or it
   is damaged (logged), -1 when it cannot be read (err). */
static int
s_cursor_load (fh_spool_t *self, uint64_t *seg, uint64_t *off, char *err, size_t errlen)
{
    int fd = openat (self->dir_fd, CURSOR_NAME, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0) {
        snprintf (err, errlen, "%s/%s: cannot open: %s", self->dir, CURSOR_NAME,
                  strerror (errno));
        return -1;
    }
    char text[128];
    ssize_t n;
    do
        n = read (fd, text, sizeof text - 1);
    while (n < 0 && errno == EINTR);
    int saved = errno;
    close (fd);
    if (n < 0) {
        snprintf (err, errlen, "%s/%s: cannot read: %s", self->dir, CURSOR_NAME,
                  strerror (saved));
        return -1;
    }
    text[n] = '\0';
    /* "fanhub-spool-cursor 1 SEG OFFSET CRC\n", CRC of all before it. */
    size_t tag = strlen (CURSOR_TAG);
    char *space = n > 0 ? strrchr (text, ' ') : NULL;
    bool valid = space && (size_t) n > tag && strncmp (text, CURSOR_TAG, tag) == 0
                 && text[n - 1] == '\n' && (size_t) (text + n - space) == 10;
    if (valid) {
        char *end;
        unsigned long crc = strtoul (space + 1, &end, 16);
        valid = *end == '\n' && crc == fh_crc32c (0, text, (size_t) (space + 1 - text));
    }
    if (valid) {
        int used = 0;
        valid = sscanf (text + tag, "%16" SCNx64 " %20" SCNu64 "%n", seg, off, &used) == 2
                && text + tag + used == space;
    }
    if (!valid) {
        fh_warning ("%s/%s: damaged cursor; reading the spool from its oldest segment "
                    "(records may be delivered again)", self->dir, CURSOR_NAME);
        return 0;
    }
    return 1;
}

/* Makes cursor.tmp again after a rename took it: one block, taken while
   the old cursor's block has just been freed. A failure only means the
   next write must find the room itself. */
static void
s_cursor_reserve (fh_spool_t *self)
{
    int fd = openat (self->dir_fd, CURSOR_TMP_NAME, O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0)
        return;
    static const char blank[128] = {0};
    if (pwrite (fd, blank, sizeof blank, 0) != (ssize_t) sizeof blank)
        unlinkat (self->dir_fd, CURSOR_TMP_NAME, 0);
    close (fd);
}

/* Writes the cursor (c_seg, c_off) atomically. Under cursor_lock. */
static int
s_cursor_write (fh_spool_t *self)
{
    char text[128];
    int len = snprintf (text, sizeof text, CURSOR_TAG "%016" PRIx64 " %" PRIu64 " ",
                        self->c_seg, self->c_off);
    len += snprintf (text + len, sizeof text - (size_t) len, "%08" PRIx32 "\n",
                     fh_crc32c (0, text, (size_t) len));
    /* cursor.tmp is kept between writes and overwritten in place: its
       block is already allocated, so a full disk (which a spool can cause)
       does not stop the cursor from moving, and with it the deletion of
       consumed segments that gives the space back. */
    const char *what = "cannot create";
    int fd = openat (self->dir_fd, CURSOR_TMP_NAME, O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
    if (fd >= 0) {
        what = "write";
        ssize_t n;
        do
            n = pwrite (fd, text, (size_t) len, 0);
        while (n < 0 && errno == EINTR);
        if (n >= 0 && n != len)
            errno = ENOSPC; /* a short write of 60 bytes: the disk is full */
        bool ok = n == len;
        if (ok && ftruncate (fd, len) != 0) {
            what = "truncate";
            ok = false;
        }
        if (ok && self->fsync != FH_SPOOL_FSYNC_NEVER) {
            what = "fsync";
            ok = fsync (fd) == 0;
        }
        int saved = errno;
        close (fd);
        errno = saved;
        if (ok) {
            if (renameat (self->dir_fd, CURSOR_TMP_NAME, self->dir_fd, CURSOR_NAME) == 0) {
                if (self->fsync == FH_SPOOL_FSYNC_ALWAYS)
                    s_sync_dir (self);
                self->c_written_seg = self->c_seg;
                self->c_written_off = self->c_off;
                self->c_written_valid = true;
                self->c_pending = 0;
                self->c_written_ns = fh_clock_mono_ns ();
                s_cursor_reserve (self);
                return 0;
            }
            what = "rename to cursor";
        }
    }
    int saved = errno;
    atomic_fetch_add (&self->cursor_errors, 1);
    fh_log_limited (&self->c_limit, FANHUB_LOG_ERROR,
                    "%s/%s: %s: %s; %" PRIu64 " records done since the last cursor would be "
                    "delivered again after a crash, and their segments stay until it can be "
                    "written (tried again)",
                    self->dir, CURSOR_TMP_NAME, what, strerror (saved), self->c_pending);
    self->c_retry_ns = fh_clock_mono_ns () + self->cursor_ns;
    errno = saved;
    return -1;
}

/* Deletes the oldest segment wholly before the consumed position (the
   written cursor may still point into it), to make room on a full disk.
   Under cursor_lock. True when one went. */
static bool
s_free_one_consumed (fh_spool_t *self)
{
    pthread_mutex_lock (&self->lock);
    uint64_t doomed = NONE;
    if (self->seg_count && self->segs[0] < self->c_seg) {
        doomed = self->segs[0];
        memmove (self->segs, self->segs + 1, (self->seg_count - 1) * sizeof *self->segs);
        self->seg_count--;
    }
    pthread_mutex_unlock (&self->lock);
    if (doomed == NONE)
        return false;
    char name[SEG_NAME_LEN + 1];
    s_seg_name (name, doomed);
    fh_warning ("%s/%s: removed before the cursor could be written (the disk is full); "
                "if the hub stops before the cursor is written, the next run reports it "
                "missing", self->dir, name);
    return unlinkat (self->dir_fd, name, 0) == 0;
}

/* s_cursor_write; on a full disk, consumed segments are removed one at a
   time until it works or none is left. Under cursor_lock. */
static int
s_cursor_write_making_room (fh_spool_t *self)
{
    int rc;
    while ((rc = s_cursor_write (self)) != 0 && errno == ENOSPC && s_free_one_consumed (self))
        ;
    return rc;
}

static bool
s_cursor_dirty (const fh_spool_t *self)
{
    return !self->c_written_valid || self->c_seg != self->c_written_seg
           || self->c_off != self->c_written_off;
}

/* Deletes the segments below the written cursor's. Under cursor_lock. */
static void
s_delete_consumed (fh_spool_t *self)
{
    uint64_t below = self->c_written_seg;
    if (!self->c_written_valid || below <= self->deleted_below)
        return;
    uint64_t doomed[64];
    size_t count;
    do {
        pthread_mutex_lock (&self->lock);
        count = 0;
        while (count < self->seg_count && count < 64 && self->segs[count] < below) {
            doomed[count] = self->segs[count];
            count++;
        }
        if (count) {
            memmove (self->segs, self->segs + count,
                     (self->seg_count - count) * sizeof *self->segs);
            self->seg_count -= count;
        }
        pthread_mutex_unlock (&self->lock);
        for (size_t i = 0; i < count; i++) {
            char name[SEG_NAME_LEN + 1];
            s_seg_name (name, doomed[i]);
            if (unlinkat (self->dir_fd, name, 0) != 0 && errno != ENOENT)
                fh_log_limited (&self->c_limit, FANHUB_LOG_ERROR, "%s/%s: cannot remove: %s",
                               self->dir, name, strerror (errno));
        }
    } while (count == 64);
    self->deleted_below = below;
}

/* ---------------------------------------------------------------- open */

static int
s_seg_cmp (const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

static int
s_segs_push (fh_spool_t *self, uint64_t seg)
{
    if (self->seg_count == self->seg_cap) {
        size_t cap = self->seg_cap ? self->seg_cap * 2 : 16;
        uint64_t *segs = realloc (self->segs, cap * sizeof *segs);
        if (!segs)
            return -1;
        self->segs = segs;
        self->seg_cap = cap;
    }
    self->segs[self->seg_count++] = seg;
    return 0;
}

static int
s_list_segments (fh_spool_t *self, char *err, size_t errlen)
{
    int fd = dup (self->dir_fd);
    DIR *dir = fd >= 0 ? fdopendir (fd) : NULL;
    if (!dir) {
        snprintf (err, errlen, "%s: cannot list: %s", self->dir, strerror (errno));
        if (fd >= 0)
            close (fd);
        return -1;
    }
    rewinddir (dir);
    struct dirent *entry;
    uint64_t seg;
    while ((entry = readdir (dir)))
        if (s_seg_parse (entry->d_name, &seg) && s_segs_push (self, seg) != 0) {
            closedir (dir);
            snprintf (err, errlen, "%s: out of memory", self->dir);
            return -1;
        }
    closedir (dir);
    if (self->seg_count)
        qsort (self->segs, self->seg_count, sizeof *self->segs, s_seg_cmp);
    return 0;
}

/* Reads segment seg from off to its end: counts its records and bytes and
   its damage, and truncates damage that runs to its end. */
static int
s_scan_segment (fh_spool_t *self, uint64_t seg, uint64_t off, bool last,
                uint64_t *file_size, char *err, size_t errlen)
{
    char name[SEG_NAME_LEN + 1];
    s_seg_name (name, seg);
    s_reader_t r;
    s_reader_init (&r, seg, off);
    r.fd = openat (self->dir_fd, name, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (r.fd < 0 || fstat (r.fd, &st) != 0) {
        snprintf (err, errlen, "%s/%s: cannot open: %s", self->dir, name, strerror (errno));
        s_reader_free (&r);
        return -1;
    }
    r.limit = (uint64_t) st.st_size;
    r.sealed = r.limit_known = true;
    *file_size = r.limit;
    if (off > r.limit || (r.limit == 0 && !last)) {
        /* Cut below the cursor, or emptied: records were lost. */
        atomic_fetch_add (&self->corrupt, 1);
        if (off > r.limit)
            fh_warning ("%s/%s: %" PRIu64 " bytes long, but the cursor is at offset %" PRIu64
                        ": records after it were lost", self->dir, name, r.limit, off);
        else
            fh_warning ("%s/%s: empty, but not the last segment: the records it held are "
                        "lost", self->dir, name);
        s_reader_free (&r);
        return 0;
    }
    uint64_t records = 0;
    int rc;
    const uint8_t *payload;
    uint32_t payload_len;
    size_t size;
    while ((rc = s_step (self, &r, true, &payload, &payload_len, &size)) == 1) {
        uint64_t seq;
        int64_t wall;
        uint32_t frames;
        if (fh_record_decode_message (payload, payload_len, &seq, &wall, &frames, NULL, 0)
            && seq > self->max_seq)
            self->max_seq = seq;
        records++;
        r.off += size;
        r.passed += size;
    }
    if (rc < 0) {
        snprintf (err, errlen, "%s/%s: cannot read: %s", self->dir, name, strerror (errno));
        s_reader_free (&r);
        return -1;
    }
    uint64_t end = r.limit;
    if (r.region_start != NONE) {
        /* A torn write, or damage to the end: cut it off, so that appends
           never follow it and the reader never meets it again. */
        if (ftruncate (r.fd, (off_t) r.region_start) != 0) {
            snprintf (err, errlen, "%s/%s: cannot truncate to %" PRIu64 " bytes: %s",
                      self->dir, name, r.region_start, strerror (errno));
            s_reader_free (&r);
            return -1;
        }
        fh_warning ("%s/%s: cut %" PRIu64 " bytes of a torn or damaged record at offset "
                    "%" PRIu64, self->dir, name, end - r.region_start, r.region_start);
        end = r.region_start;
        /* The scan remembered where it began; the reader will not meet it. */
        if (self->known_count && self->known[self->known_count - 1].seg == seg
            && self->known[self->known_count - 1].off == r.region_start)
            self->known_count--;
    }
    s_reader_free (&r);
    atomic_fetch_add (&self->records, records);
    if (end > off)
        atomic_fetch_add (&self->bytes, end - off);
    return 0;
}

/* Records lost before open, counted and logged: segments are numbered
   without gaps from the cursor's on (the writer takes the next number,
   and only segments below the written cursor are ever deleted), so a
   number missing in between is a lost segment; so is the cursor's own
   segment when the cursor points inside it. */
static void
s_count_missing (fh_spool_t *self, bool found, uint64_t c_seg, uint64_t c_off)
{
    char name[SEG_NAME_LEN + 1];
    uint64_t expect = self->seg_count ? self->segs[0] : 0;
    if (found) {
        bool exists = self->seg_count && self->segs[0] == c_seg;
        /* (SEG, 0) of a segment never created is where a new run began. */
        expect = exists || c_off > 0 ? c_seg : c_seg + 1;
    }
    for (size_t i = 0; i < self->seg_count; i++) {
        for (; expect < self->segs[i]; expect++) {
            atomic_fetch_add (&self->corrupt, 1);
            s_seg_name (name, expect);
            fh_warning ("%s/%s: missing: the records it held are lost", self->dir, name);
        }
        expect = self->segs[i] + 1;
    }
}

fh_spool_t *
fh_spool_open (const char *dir, const fh_spool_options_t *options, uint64_t *corrupt_found,
               char *err, size_t errlen)
{
    fh_spool_options_t defaults = {0};
    if (!options)
        options = &defaults;
    if (fh_fs_mkdir_p (dir, err, errlen) != 0)
        return NULL;
    fh_spool_t *self = calloc (1, sizeof *self);
    if (!self || !(self->dir = strdup (dir))) {
        snprintf (err, errlen, "%s: out of memory", dir);
        free (self);
        return NULL;
    }
    self->dir_fd = self->lock_fd = self->w_fd = -1;
    s_reader_init (&self->r, 0, 0);
    pthread_mutex_init (&self->lock, NULL);
    pthread_mutex_init (&self->cursor_lock, NULL);
    self->segment_bytes =
        options->segment_bytes ? options->segment_bytes : FH_SPOOL_DEFAULT_SEGMENT_BYTES;
    self->max_bytes = options->max_bytes;
    self->fsync = options->fsync;
    self->fsync_interval_ns = (options->fsync_interval_ms > 0
                                   ? options->fsync_interval_ms
                                   : FH_SPOOL_DEFAULT_FSYNC_INTERVAL_MS)
                              * INT64_C (1000000);
    self->cursor_records =
        options->cursor_records ? options->cursor_records : FH_SPOOL_DEFAULT_CURSOR_RECORDS;
    self->cursor_ns =
        (options->cursor_ms > 0 ? options->cursor_ms : FH_SPOOL_DEFAULT_CURSOR_MS)
        * INT64_C (1000000);
    atomic_init (&self->records, 0);
    atomic_init (&self->bytes, 0);
    atomic_init (&self->corrupt, 0);
    atomic_init (&self->syncs, 0);

    self->dir_fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (self->dir_fd < 0) {
        snprintf (err, errlen, "%s: cannot open: %s", dir, strerror (errno));
        goto fail;
    }
    self->lock_fd = openat (self->dir_fd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    if (self->lock_fd < 0) {
        snprintf (err, errlen, "%s/%s: cannot open: %s", dir, LOCK_NAME, strerror (errno));
        goto fail;
    }
    if (flock (self->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            snprintf (err, errlen, "%s/%s: the spool is already open (locked)", dir,
                      LOCK_NAME);
        else
            snprintf (err, errlen, "%s/%s: cannot lock: %s", dir, LOCK_NAME, strerror (errno));
        goto fail;
    }
    /* A cursor.tmp left by the last run is scratch: overwritten in place
       by the next cursor write. Made now when missing, while there is room
       for it. */
    if (faccessat (self->dir_fd, CURSOR_TMP_NAME, F_OK, 0) != 0)
        s_cursor_reserve (self);

    uint64_t c_seg = 0, c_off = 0;
    int found = s_cursor_load (self, &c_seg, &c_off, err, errlen);
    if (found < 0 || s_list_segments (self, err, errlen) != 0)
        goto fail;
    const uint64_t file_seg = c_seg, file_off = c_off;
    /* Segments below the cursor's were consumed: a crash came between the
       cursor's write and their removal. */
    size_t first = 0;
    if (found)
        while (first < self->seg_count && self->segs[first] < c_seg) {
            char name[SEG_NAME_LEN + 1];
            s_seg_name (name, self->segs[first]);
            if (unlinkat (self->dir_fd, name, 0) != 0 && errno != ENOENT)
                fh_warning ("%s/%s: cannot remove: %s", dir, name, strerror (errno));
            first++;
        }
    if (first) {
        memmove (self->segs, self->segs + first,
                 (self->seg_count - first) * sizeof *self->segs);
        self->seg_count -= first;
    }
    s_count_missing (self, found != 0, c_seg, c_off);
    /* The writer's first segment: past every segment and the cursor. */
    uint64_t last = self->seg_count ? self->segs[self->seg_count - 1] : 0;
    self->w_seg = (found && c_seg > last ? c_seg : last) + 1;
    /* The cursor's segment may be gone (it was empty and never created,
       or removed by hand): start at the next one there is. */
    if (!found || self->seg_count == 0 || self->segs[0] != c_seg) {
        c_seg = self->seg_count ? self->segs[0] : self->w_seg;
        c_off = 0;
    }
    for (size_t i = 0; i < self->seg_count; i++) {
        uint64_t size;
        if (s_scan_segment (self, self->segs[i], self->segs[i] == c_seg ? c_off : 0,
                            i + 1 == self->seg_count, &size, err, errlen)
            != 0)
            goto fail;
        if (self->segs[i] == c_seg && c_off > size)
            c_off = size; /* counted as lost: read on from its end */
    }

    self->sync_from = self->w_seg;
    self->first_w_seg = self->w_seg;
    self->c_seg = self->c_written_seg = c_seg;
    self->c_off = self->c_written_off = c_off;
    /* A position the file does not hold yet is written at the first
       chance (consumed, tick or close). */
    self->c_written_valid = found && file_seg == c_seg && file_off == c_off;
    self->c_written_ns = fh_clock_mono_ns ();
    self->deleted_below = self->seg_count ? self->segs[0] : c_seg;
    s_reader_init (&self->r, c_seg, c_off);
    self->mark_base = 1;
    if (corrupt_found)
        *corrupt_found = atomic_load (&self->corrupt);
    return self;

fail:
    fh_spool_abandon (&self);
    return NULL;
}

/* ---------------------------------------------------------------- append */

/* Starts the next segment file; the old one is sealed. */
static int
s_roll (fh_spool_t *self)
{
    uint64_t seg = self->w_created ? self->w_seg + 1 : self->w_seg;
    char name[SEG_NAME_LEN + 1];
    s_seg_name (name, seg);
    int fd = openat (self->dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0) {
        int saved = errno;
        fh_log_limited (&self->w_limit, FANHUB_LOG_ERROR, "%s/%s: cannot create: %s",
                       self->dir, name, strerror (saved));
        errno = saved;
        return -1;
    }
    if (self->fsync == FH_SPOOL_FSYNC_ALWAYS && s_sync_dir (self) != 0) {
        int saved = errno;
        unlinkat (self->dir_fd, name, 0);
        close (fd);
        errno = saved;
        return -1;
    }
    pthread_mutex_lock (&self->lock);
    int rc = s_segs_push (self, seg);
    if (rc == 0) {
        self->w_seg = seg;
        self->w_created = true;
        self->w_off = 0;
        self->dir_unsynced = true;
    }
    pthread_mutex_unlock (&self->lock);
    if (rc != 0) {
        unlinkat (self->dir_fd, name, 0);
        close (fd);
        errno = ENOMEM;
        return -1;
    }
    if (self->w_fd >= 0)
        close (self->w_fd);
    self->w_fd = fd;
    self->w_broken = false;
    return 0;
}

/* One group commit in progress (fh_spool_append_batch): records encoded
   in w_buf[0, buffered) go to the file at w_off + written; entries from
   `first` on wait for the commit that makes them visible. */
typedef struct {
    fh_spool_entry_t *entries;
    size_t first;
    uint64_t written;
    size_t buffered;
    uint64_t records, bytes;
} s_pass_t;

#define S_WAITING (-2) /* an entry's rc while its commit is to come */

/* Grows w_buf to hold `size` bytes. */
static int
s_buf_reserve (fh_spool_t *self, size_t size)
{
    if (size <= self->w_cap)
        return 0;
    size_t cap = self->w_cap ? self->w_cap : 4096;
    while (cap < size)
        cap *= 2;
    uint8_t *buf = realloc (self->w_buf, cap);
    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    self->w_buf = buf;
    self->w_cap = cap;
    return 0;
}

/* Writes what is buffered. -1 with errno (a short write of 0 is ENOSPC). */
static int
s_pass_flush (fh_spool_t *self, s_pass_t *pass)
{
    size_t done = 0;
    while (done < pass->buffered) {
        ssize_t n = pwrite (self->w_fd, self->w_buf + done, pass->buffered - done,
                            (off_t) (self->w_off + pass->written + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ENOSPC;
            return -1;
        }
        done += (size_t) n;
    }
    pass->written += done;
    pass->buffered = 0;
    return 0;
}

/* The pass failed with errno: its waiting entries (from pass->first) and
   every entry from `next` on (not yet looked at) are failed. Logged, and
   what part of them reached the file is taken back: the reader only reads
   to w_off, but a later segment switch seals the file at its size; if the
   truncation fails too, the next append switches segments, and the reader
   skips the part as damage. */
static void
s_pass_fail (fh_spool_t *self, s_pass_t *pass, size_t next, size_t count, const char *what)
{
    int saved = errno;
    char name[SEG_NAME_LEN + 1];
    s_seg_name (name, self->w_seg);
    if (what) /* NULL: logged already */
        fh_log_limited (&self->w_limit, FANHUB_LOG_ERROR, "%s/%s: %s: %s", self->dir, name,
                        what, strerror (saved));
    if (self->w_fd >= 0 && ftruncate (self->w_fd, (off_t) self->w_off) != 0)
        self->w_broken = true;
    for (size_t i = pass->first; i < count; i++)
        if (i >= next || pass->entries[i].rc == S_WAITING) {
            pass->entries[i].rc = -1;
            pass->entries[i].error = saved;
        }
    pass->first = count;
    pass->written = pass->buffered = 0;
    pass->records = pass->bytes = 0;
    errno = saved;
}

/* Writes what is buffered, syncs it (ALWAYS: one fdatasync for every
   record of the pass) and only then makes the waiting entries before
   `upto` visible to the reader, at once. -1 (the entries failed: see
   s_pass_fail) on error. */
static int
s_pass_commit (fh_spool_t *self, s_pass_t *pass, size_t upto, size_t count)
{
    if (pass->buffered && s_pass_flush (self, pass) != 0) {
        s_pass_fail (self, pass, upto, count, "write");
        return -1;
    }
    if (pass->written && self->fsync == FH_SPOOL_FSYNC_ALWAYS) {
        if (fdatasync (self->w_fd) != 0) {
            s_pass_fail (self, pass, upto, count, "fdatasync");
            return -1;
        }
        atomic_fetch_add (&self->syncs, 1);
    }
    if (pass->records) {
        pthread_mutex_lock (&self->lock);
        self->w_off += pass->written;
        self->unsynced = true;
        atomic_fetch_add (&self->records, pass->records);
        atomic_fetch_add (&self->bytes, pass->bytes);
        pthread_mutex_unlock (&self->lock);
    }
    for (size_t i = pass->first; i < upto; i++)
        if (pass->entries[i].rc == S_WAITING)
            pass->entries[i].rc = 0;
    pass->first = upto;
    pass->written = 0;
    pass->records = pass->bytes = 0;
    return 0;
}

size_t
fh_spool_append_batch (fh_spool_t *self, fh_spool_entry_t *entries, size_t count)
{
    s_pass_t pass = {.entries = entries};
    size_t i;
    for (i = 0; i < count; i++) {
        fh_spool_entry_t *e = &entries[i];
        e->error = 0;
        size_t payload = e->frame_count >= 2 ? fh_record_message_size (e->frames, e->frame_count)
                                             : 0;
        if (payload == 0) { /* a message has a topic and a body, and fits */
            e->rc = -1;
            e->error = e->frame_count < 2 ? EINVAL : EMSGSIZE;
            continue;
        }
        size_t total = FH_RECORD_HEADER + payload;
        if (self->max_bytes && atomic_load (&self->bytes) + pass.bytes + total > self->max_bytes) {
            e->rc = FH_SPOOL_FULL;
            continue;
        }
        /* w_off is only ever written by this thread: it reads it unlocked. */
        uint64_t end = self->w_off + pass.written + pass.buffered;
        if (self->w_fd < 0 || self->w_broken || (end > 0 && end + total > self->segment_bytes)) {
            /* The records so far are committed to this segment before the
               next one exists: the reader reads a sealed segment to its
               size, so it must not see it before the sync. */
            if (s_pass_commit (self, &pass, i, count) != 0)
                break;
            if (s_roll (self) != 0) {
                s_pass_fail (self, &pass, i, count, NULL); /* s_roll logged it */
                break;
            }
        }
        else if (pass.buffered && pass.buffered + total > WRITE_CHUNK
                 && s_pass_flush (self, &pass) != 0) {
            s_pass_fail (self, &pass, i, count, "write");
            break;
        }
        if (s_buf_reserve (self, pass.buffered + total) != 0) {
            e->rc = -1;
            e->error = ENOMEM;
            continue;
        }
        fh_record_encode_message (self->w_buf + pass.buffered, payload, e->seq,
                                  e->received_wall_ns, e->frames, e->frame_count);
        pass.buffered += total;
        pass.records++;
        pass.bytes += total;
        e->rc = S_WAITING;
    }
    if (i == count)
        s_pass_commit (self, &pass, count, count);
    size_t stored = 0;
    for (i = 0; i < count; i++)
        stored += entries[i].rc == 0;
    return stored;
}

int
fh_spool_append (fh_spool_t *self, uint64_t seq, int64_t received_wall_ns,
                 const fanhub_bytes_t *frames, uint32_t frame_count)
{
    fh_spool_entry_t entry = {.seq = seq, .received_wall_ns = received_wall_ns,
                              .frames = frames, .frame_count = frame_count};
    fh_spool_append_batch (self, &entry, 1);
    if (entry.rc < 0)
        errno = entry.error;
    return entry.rc;
}

uint64_t
fh_spool_syncs (fh_spool_t *self)
{
    return atomic_load (&self->syncs);
}

/* ---------------------------------------------------------------- read */

/* Appends a mark for a record just read, ending at (seg, off). Under
   cursor_lock. 0, or -1 when out of memory. */
static int
s_mark_push (fh_spool_t *self, uint64_t seg, uint64_t off, uint64_t passed, uint64_t *mark)
{
    if (self->mark_count == self->mark_cap) {
        size_t cap = self->mark_cap ? self->mark_cap * 2 : 64;
        s_mark_t *marks = malloc (cap * sizeof *marks);
        if (!marks)
            return -1;
        for (size_t i = 0; i < self->mark_count; i++)
            marks[i] = self->marks[(self->mark_head + i) % self->mark_cap];
        free (self->marks);
        self->marks = marks;
        self->mark_cap = cap;
        self->mark_head = 0;
    }
    self->marks[(self->mark_head + self->mark_count) % self->mark_cap] =
        (s_mark_t){.seg = seg, .off = off, .passed = passed, .done = false};
    *mark = self->mark_base + self->mark_count;
    self->mark_count++;
    return 0;
}

static void s_mark_advance (fh_spool_t *self);

/* Damage the reader skipped with no record after it (yet): a mark that
   is done already, so that the consumed position moves over the damage
   once every record before it is done, and a restart neither meets it
   again nor counts it twice. */
static void
s_mark_skipped (fh_spool_t *self, s_reader_t *r)
{
    uint64_t mark;
    pthread_mutex_lock (&self->cursor_lock);
    if (s_mark_push (self, r->seg, r->off, r->passed, &mark) == 0) {
        self->marks[(self->mark_head + (mark - self->mark_base)) % self->mark_cap].done = true;
        r->passed = 0;
        s_mark_advance (self);
    }
    pthread_mutex_unlock (&self->cursor_lock);
}

/* The reader is done with its sealed segment: on to the next one (or the
   writer's, which may not exist yet). */
static void
s_next_segment (fh_spool_t *self)
{
    s_reader_t *r = &self->r;
    pthread_mutex_lock (&self->lock);
    uint64_t next = self->w_seg;
    for (size_t i = 0; i < self->seg_count; i++)
        if (self->segs[i] > r->seg) {
            next = self->segs[i];
            break;
        }
    pthread_mutex_unlock (&self->lock);
    if (r->fd >= 0)
        close (r->fd);
    r->fd = -1;
    r->seg = next;
    r->off = 0;
    r->sealed = r->limit_known = r->in_region = false;
    r->buf_len = 0;
}

int
fh_spool_read (fh_spool_t *self, fh_spool_record_t *out)
{
    s_reader_t *r = &self->r;
    char name[SEG_NAME_LEN + 1];
    for (;;) {
        if (!r->sealed) {
            pthread_mutex_lock (&self->lock);
            if (r->seg < self->w_seg)
                r->sealed = true;
            else
                r->limit = self->w_off;
            if (!r->sealed && r->off >= r->limit) {
                /* Everything appended has been read: whatever the count
                   says (a record damaged since it was appended was never
                   read), none is unread. */
                atomic_store (&self->records, 0);
                pthread_mutex_unlock (&self->lock);
                if (r->passed)
                    s_mark_skipped (self, r);
                return 0;
            }
            pthread_mutex_unlock (&self->lock);
        }
        s_seg_name (name, r->seg);
        if (r->fd < 0) {
            r->fd = openat (self->dir_fd, name, O_RDONLY | O_CLOEXEC);
            if (r->fd < 0 && errno == ENOENT && r->sealed) {
                fh_log_limited (&self->r_limit, FANHUB_LOG_WARNING,
                               "%s/%s: missing; going on with the next segment", self->dir,
                               name);
                s_next_segment (self);
                continue;
            }
            if (r->fd < 0)
                goto io_error;
            r->buf_len = 0;
        }
        if (r->sealed && !r->limit_known) {
            struct stat st;
            if (fstat (r->fd, &st) != 0)
                goto io_error;
            r->limit = (uint64_t) st.st_size;
            r->limit_known = true;
        }
        const uint8_t *payload;
        uint32_t payload_len;
        size_t size;
        int rc = s_step (self, r, false, &payload, &payload_len, &size);
        if (rc < 0)
            goto io_error;
        if (rc == 0) {
            if (r->sealed)
                s_next_segment (self);
            continue;
        }
        uint32_t count;
        bool ok = fh_record_decode_message (payload, payload_len, &out->seq,
                                            &out->received_wall_ns, &count, self->frames,
                                            self->frame_cap);
        assert (ok); /* s_step checked it */
        if (count > self->frame_cap) {
            fanhub_bytes_t *frames = realloc (self->frames, count * sizeof *frames);
            if (!frames) {
                errno = ENOMEM;
                goto io_error;
            }
            self->frames = frames;
            self->frame_cap = count;
            ok = fh_record_decode_message (payload, payload_len, &out->seq,
                                           &out->received_wall_ns, &count, self->frames,
                                           self->frame_cap);
            assert (ok);
        }
        (void) ok;
        pthread_mutex_lock (&self->cursor_lock);
        if (s_mark_push (self, r->seg, r->off + size, r->passed + size, &out->mark) != 0) {
            pthread_mutex_unlock (&self->cursor_lock);
            errno = ENOMEM;
            goto io_error;
        }
        pthread_mutex_unlock (&self->cursor_lock);
        out->frame_count = count;
        out->frames = self->frames;
        out->this_run = r->seg >= self->first_w_seg;
        r->off += size;
        r->passed = 0;
        /* Only this thread takes records away, so the count cannot reach
           zero between the look and the subtraction. */
        if (atomic_load (&self->records) > 0)
            atomic_fetch_sub (&self->records, 1);
        return 1;
    }
io_error:;
    int saved = errno;
    fh_log_limited (&self->r_limit, FANHUB_LOG_ERROR, "%s/%s: cannot read: %s", self->dir,
                   name, strerror (saved));
    errno = saved;
    return -1;
}

/* Moves the consumed position over the done marks at the head of the
   ring; writes the cursor when due and deletes what it left behind. Under
   cursor_lock. */
static void
s_mark_advance (fh_spool_t *self)
{
    uint64_t passed = 0;
    bool moved = false;
    while (self->mark_count && self->marks[self->mark_head].done) {
        const s_mark_t *mark = &self->marks[self->mark_head];
        self->c_seg = mark->seg;
        self->c_off = mark->off;
        passed += mark->passed;
        self->c_pending++;
        self->mark_head = (self->mark_head + 1) % self->mark_cap;
        self->mark_count--;
        self->mark_base++;
        moved = true;
    }
    if (!moved)
        return;
    s_sub_saturating (&self->bytes, passed);
    if (s_cursor_dirty (self)) {
        int64_t now = fh_clock_mono_ns ();
        bool due = self->c_seg != self->c_written_seg
                   || self->c_pending >= self->cursor_records
                   || now - self->c_written_ns >= self->cursor_ns;
        if (due && now >= self->c_retry_ns)
            s_cursor_write_making_room (self);
    }
    s_delete_consumed (self);
}

void
fh_spool_done (fh_spool_t *self, uint64_t mark)
{
    pthread_mutex_lock (&self->cursor_lock);
    /* A mark below the base is done already; one past the ring was never
       handed out: both are the caller's error, and harmless here. */
    assert (mark >= self->mark_base && mark - self->mark_base < self->mark_count);
    if (mark >= self->mark_base && mark - self->mark_base < self->mark_count) {
        self->marks[(self->mark_head + (mark - self->mark_base)) % self->mark_cap].done = true;
        s_mark_advance (self);
    }
    pthread_mutex_unlock (&self->cursor_lock);
}

void
fh_spool_consumed (fh_spool_t *self)
{
    pthread_mutex_lock (&self->cursor_lock);
    for (size_t i = 0; i < self->mark_count; i++)
        self->marks[(self->mark_head + i) % self->mark_cap].done = true;
    s_mark_advance (self);
    pthread_mutex_unlock (&self->cursor_lock);
}

uint64_t
fh_spool_undone (fh_spool_t *self)
{
    pthread_mutex_lock (&self->cursor_lock);
    uint64_t undone = 0;
    for (size_t i = 0; i < self->mark_count; i++)
        undone += !self->marks[(self->mark_head + i) % self->mark_cap].done;
    pthread_mutex_unlock (&self->cursor_lock);
    return undone;
}

/* ---------------------------------------------------------------- the rest */

uint64_t
fh_spool_records (fh_spool_t *self)
{
    return atomic_load (&self->records);
}

uint64_t
fh_spool_bytes (fh_spool_t *self)
{
    return atomic_load (&self->bytes);
}

uint64_t
fh_spool_corrupt (fh_spool_t *self)
{
    return atomic_load (&self->corrupt);
}

/* Syncs every segment appended to since the last sync, and the directory
   when a segment was created. */
static int
s_sync_appended (fh_spool_t *self)
{
    pthread_mutex_lock (&self->lock);
    uint64_t from = self->sync_from, to = self->w_seg;
    bool created = self->w_created, unsynced = self->unsynced, dir = self->dir_unsynced;
    self->sync_from = self->w_seg;
    self->unsynced = self->dir_unsynced = false;
    pthread_mutex_unlock (&self->lock);
    int rc = 0;
    for (uint64_t seg = from; unsynced && seg <= to && (seg < to || created); seg++) {
        char name[SEG_NAME_LEN + 1];
        s_seg_name (name, seg);
        /* fdatasync flushes the file, whichever descriptor asks. */
        int fd = openat (self->dir_fd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
            continue; /* consumed and deleted already */
        if (fd < 0 || fdatasync (fd) != 0) {
            fh_error ("%s/%s: %s: %s", self->dir, name, fd < 0 ? "cannot open" : "fdatasync",
                      strerror (errno));
            rc = -1;
        }
        else
            atomic_fetch_add (&self->syncs, 1);
        if (fd >= 0)
            close (fd);
    }
    if (dir && s_sync_dir (self) != 0)
        rc = -1;
    return rc;
}

int
fh_spool_tick (fh_spool_t *self, int64_t now_ns)
{
    int rc = 0;
    if (self->fsync == FH_SPOOL_FSYNC_INTERVAL
        && now_ns - self->last_sync_ns >= self->fsync_interval_ns) {
        self->last_sync_ns = now_ns;
        rc = s_sync_appended (self);
    }
    pthread_mutex_lock (&self->cursor_lock);
    if (s_cursor_dirty (self) && now_ns - self->c_written_ns >= self->cursor_ns
        && now_ns >= self->c_retry_ns && s_cursor_write_making_room (self) != 0)
        rc = -1;
    s_delete_consumed (self);
    pthread_mutex_unlock (&self->cursor_lock);
    return rc;
}

int
fh_spool_close_checked (fh_spool_t **self_p, uint64_t *repeated)
{
    fh_spool_t *self = *self_p;
    if (repeated)
        *repeated = 0;
    if (!self)
        return 0;
    if (self->fsync == FH_SPOOL_FSYNC_INTERVAL)
        s_sync_appended (self);
    pthread_mutex_lock (&self->cursor_lock);
    int rc = 0;
    if (s_cursor_dirty (self))
        rc = s_cursor_write_making_room (self);
    if (rc != 0) {
        uint64_t again = self->c_pending;
        atomic_fetch_add (&s_unsaved_total, again);
        if (repeated)
            *repeated = again;
        fh_error ("%s/%s: cannot write the cursor at close: %llu done messages will be "
                  "delivered again by the next run", self->dir, CURSOR_NAME,
                  (unsigned long long) again);
    }
    s_delete_consumed (self);
    pthread_mutex_unlock (&self->cursor_lock);
    fh_spool_abandon (self_p);
    return rc;
}

void
fh_spool_close (fh_spool_t **self_p)
{
    fh_spool_close_checked (self_p, NULL);
}

uint64_t
fh_spool_max_seq (fh_spool_t *self)
{
    return self->max_seq;
}

uint64_t
fh_spool_unsaved_total (void)
{
    return atomic_load (&s_unsaved_total);
}

uint64_t
fh_spool_cursor_errors (fh_spool_t *self)
{
    return atomic_load (&self->cursor_errors);
}

void
fh_spool_abandon (fh_spool_t **self_p)
{
    fh_spool_t *self = *self_p;
    if (!self)
        return;
    if (self->w_fd >= 0)
        close (self->w_fd);
    s_reader_free (&self->r);
    if (self->dir_fd >= 0)
        close (self->dir_fd);
    if (self->lock_fd >= 0)
        close (self->lock_fd); /* releases the flock */
    pthread_mutex_destroy (&self->lock);
    pthread_mutex_destroy (&self->cursor_lock);
    free (self->w_buf);
    free (self->frames);
    free (self->known);
    free (self->marks);
    free (self->segs);
    free (self->dir);
    free (self);
    *self_p = NULL;
}
