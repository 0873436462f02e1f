/*  spool - a consumer's disk queue. See spool.h for the contract, and
    spool_internal.h for how its files share the work: this one opens and
    closes the spool, appends (group commit), reads, ticks and counts.

    Segments are numbered upwards and a number is never reused: after a
    restart the writer starts at one past the highest segment or cursor
    segment, so a stale cursor can never point into a newer file.
*/
#include "spool_internal.h"

#include "fs.h"
#include "memory.h"

#include "clock.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITE_CHUNK (1u << 20) /* an append pass writes at most this much at once */
#define LOCK_NAME FH_SPOOL_LOCK_NAME

/* Done records whose cursor no clean close could write, over every spool
   of the process: what the next run will deliver again. */
static atomic_uint_fast64_t s_unsaved_total;

/* When the spool's directory was removed while open (rm -r by
   hand), makes it again in its place (the lock and the descriptor number
   kept, so that no thread's openat ever meets a closed one), logs it and
   has the appender start a new segment there. What it held that the
   reader had not opened is lost, counted by the reader as it meets the
   segments missing. True when it was made again now. Any thread. */
static bool
s_dir_remade (fh_spool_t *self)
{
    struct stat st;
    if (fstat (self->dir_fd, &st) != 0 || st.st_nlink > 0)
        return false;
    pthread_mutex_lock (&self->dir_lock);
    char err[512];
    bool made = false;
    int fd = -1, lock = -1;
    /* Another thread may have made it again meanwhile. */
    if (fstat (self->dir_fd, &st) != 0 || st.st_nlink > 0)
        goto out;
    if (fh_fs_mkdir_p (self->dir, err, sizeof err) != 0
        || (fd = open (self->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0
        || dup2 (fd, self->dir_fd) < 0) {
        fh_log_limited (&self->w_limit, FANHUB_LOG_ERROR,
                        "%s: the spool's directory was removed and cannot be made again: %s",
                        self->dir, fd < 0 && err[0] ? err : strerror (errno));
        goto out;
    }
    made = true;
    lock = openat (self->dir_fd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    if (lock < 0 || flock (lock, LOCK_EX | LOCK_NB) != 0 || dup2 (lock, self->lock_fd) < 0)
        fh_warning ("%s/%s: cannot lock the spool made again: %s", self->dir, LOCK_NAME,
                    strerror (errno));
    atomic_store (&self->w_reroll, true);
    fh_error ("%s: the spool's directory was removed while the hub had it open: made again; "
              "the records it held that were not read yet are lost (counted in spool_lost as "
              "the reader meets their segments missing)",
              self->dir);
out:
    if (fd >= 0)
        close (fd);
    if (lock >= 0)
        close (lock);
    pthread_mutex_unlock (&self->dir_lock);
    return made;
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
    fh_sp_reader_init (&self->r, 0, 0);
    pthread_mutex_init (&self->lock, NULL);
    pthread_mutex_init (&self->cursor_lock, NULL);
    pthread_mutex_init (&self->dir_lock, NULL);
    self->segment_bytes = options->segment_bytes ? options->segment_bytes
                                                 : FH_SPOOL_DEFAULT_SEGMENT_BYTES;
    self->max_bytes = options->max_bytes;
    self->fsync = options->fsync;
    self->fsync_interval_ns = (options->fsync_interval_ms > 0 ? options->fsync_interval_ms
                                                              : FH_SPOOL_DEFAULT_FSYNC_INTERVAL_MS)
                              * INT64_C (1000000);
    self->cursor_records = options->cursor_records ? options->cursor_records
                                                   : FH_SPOOL_DEFAULT_CURSOR_RECORDS;
    self->cursor_ns = (options->cursor_ms > 0 ? options->cursor_ms : FH_SPOOL_DEFAULT_CURSOR_MS)
                      * INT64_C (1000000);
    atomic_init (&self->records, 0);
    atomic_init (&self->bytes, 0);

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
            snprintf (err, errlen, "%s/%s: the spool is already open (locked)", dir, LOCK_NAME);
        else
            snprintf (err, errlen, "%s/%s: cannot lock: %s", dir, LOCK_NAME, strerror (errno));
        goto fail;
    }
    /* A cursor.tmp left by the last run is scratch: overwritten in place
       by the next cursor write. Made now when missing, while there is room
       for it. */
    if (faccessat (self->dir_fd, CURSOR_TMP_NAME, F_OK, 0) != 0)
        fh_sp_cursor_reserve (self);

    if (fh_sp_recover (self, err, errlen) != 0)
        goto fail;
    if (corrupt_found)
        *corrupt_found = fh_count_read (&self->counts.spool_corrupt);
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
    fh_sp_seg_name (name, seg);
    int fd = openat (self->dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0 && errno == ENOENT && s_dir_remade (self))
        fd = openat (self->dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    /* Something put there by hand (a directory): passed over, a few times
       at most (the next start knows it as a stray, not a lost segment). */
    for (int tries = 0; fd < 0 && errno == EEXIST && tries < 8; tries++) {
        fh_log_limited (&self->w_limit, FANHUB_LOG_WARNING,
                        "%s/%s: already there, not made by this spool: passed over", self->dir,
                        name);
        fh_sp_seg_name (name, ++seg);
        fd = openat (self->dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    }
    if (fd < 0) {
        int saved = errno;
        fh_log_limited (&self->w_limit, FANHUB_LOG_ERROR, "%s/%s: cannot create: %s", self->dir,
                        name, strerror (saved));
        errno = saved;
        return -1;
    }
    if (self->fsync == FH_SPOOL_FSYNC_ALWAYS && fh_sp_sync_dir (self) != 0) {
        int saved = errno;
        unlinkat (self->dir_fd, name, 0);
        close (fd);
        errno = saved;
        return -1;
    }
    pthread_mutex_lock (&self->lock);
    int rc = fh_sp_segs_push (self, seg);
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
    fh_memory_populate (buf + self->w_cap, cap - self->w_cap); /* about to be filled */
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
    fh_sp_seg_name (name, self->w_seg);
    if (what) /* NULL: logged already */
        fh_log_limited (&self->w_limit, FANHUB_LOG_ERROR, "%s/%s: %s: %s", self->dir, name, what,
                        strerror (saved));
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
        if (fh_fs_fdatasync (self->w_fd) != 0) {
            s_pass_fail (self, pass, upto, count, "fdatasync");
            return -1;
        }
        fh_count_add (&self->counts.spool_fsyncs, 1);
    }
    if (pass->records) {
        pthread_mutex_lock (&self->lock);
        self->w_off += pass->written;
        self->unsynced = true;
        atomic_fetch_add (&self->records, pass->records);
        atomic_fetch_add (&self->bytes, pass->bytes);
        /* Out of memory only leaves a later loss of these uncounted. */
        (void) fh_sp_tally_add (self, self->w_seg, pass->records, pass->bytes);
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
        bool reroll = atomic_load_explicit (&self->w_reroll, memory_order_relaxed)
                      && atomic_exchange (&self->w_reroll, false);
        if (self->w_fd < 0 || self->w_broken || reroll
            || (end > 0 && end + total > self->segment_bytes)) {
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
        fh_record_encode_message (self->w_buf + pass.buffered, payload, e->seq, e->received_wall_ns,
                                  e->frames, e->frame_count);
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
    fh_spool_entry_t entry = {.seq = seq,
                              .received_wall_ns = received_wall_ns,
                              .frames = frames,
                              .frame_count = frame_count};
    fh_spool_append_batch (self, &entry, 1);
    if (entry.rc < 0)
        errno = entry.error;
    return entry.rc;
}

uint64_t
fh_spool_syncs (fh_spool_t *self)
{
    return fh_count_read (&self->counts.spool_fsyncs);
}

/* The reader is done with its sealed segment (`why` when it was missing
   or cut short: what it held and was not read is lost, and counted): on
   to the next one (or the writer's, which may not exist yet). */
static void
s_next_segment (fh_spool_t *self, const char *why)
{
    fh_sp_reader_t *r = &self->r;
    uint64_t lost = fh_sp_tally_leave (self);
    if (lost) {
        char name[SEG_NAME_LEN + 1];
        fh_sp_seg_name (name, r->seg);
        fh_log_limited (&self->r_limit, FANHUB_LOG_ERROR,
                        "%s/%s: %s: %" PRIu64 " records lost (counted in spool_lost); going on "
                        "with the next segment",
                        self->dir, name, why, lost);
    }
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
    r->start = r->taken = 0;
}

/* Hands out the message record r is at (size bytes, payload checked by
   fh_sp_step): decodes its frames into out and marks it read. 0, or -1
   with errno. */
static int
s_take_record (fh_spool_t *self, fh_spool_record_t *out, const uint8_t *payload,
               uint32_t payload_len, size_t size)
{
    fh_sp_reader_t *r = &self->r;
    uint32_t count;
    bool ok = fh_record_decode_message (payload, payload_len, &out->seq, &out->received_wall_ns,
                                        &count, self->frames, self->frame_cap);
    assert (ok); /* fh_sp_step checked it */
    if (count > self->frame_cap) {
        fanhub_bytes_t *frames = realloc (self->frames, count * sizeof *frames);
        if (!frames) {
            errno = ENOMEM;
            return -1;
        }
        self->frames = frames;
        self->frame_cap = count;
        ok = fh_record_decode_message (payload, payload_len, &out->seq, &out->received_wall_ns,
                                       &count, self->frames, self->frame_cap);
        assert (ok);
    }
    (void) ok;
    pthread_mutex_lock (&self->cursor_lock);
    if (fh_sp_mark_push (self, r->seg, r->off + size, r->passed + size, &out->mark) != 0) {
        pthread_mutex_unlock (&self->cursor_lock);
        errno = ENOMEM;
        return -1;
    }
    pthread_mutex_unlock (&self->cursor_lock);
    out->frame_count = count;
    out->frames = self->frames;
    out->this_run = r->seg >= self->first_w_seg;
    r->off += size;
    r->passed = 0;
    r->taken++;
    return 0;
}

int
fh_spool_read (fh_spool_t *self, fh_spool_record_t *out)
{
    fh_sp_reader_t *r = &self->r;
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
                    fh_sp_mark_skipped (self, r);
                return 0;
            }
            pthread_mutex_unlock (&self->lock);
        }
        fh_sp_seg_name (name, r->seg);
        if (r->fd < 0) {
            r->fd = openat (self->dir_fd, name, O_RDONLY | O_CLOEXEC);
            if (r->fd < 0 && errno == ENOENT) {
                s_dir_remade (self); /* if that is why */
                errno = ENOENT;
            }
            if (r->fd < 0 && errno == ENOENT && r->sealed) {
                s_next_segment (self, "missing");
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
        int rc = fh_sp_step (self, r, false, &payload, &payload_len, &size);
        if (rc < 0)
            goto io_error;
        if (rc == 0) {
            if (r->sealed)
                s_next_segment (self, "ended early (cut short, or damaged)");
            continue;
        }
        if (s_take_record (self, out, payload, payload_len, size) != 0)
            goto io_error;
        /* Only this thread takes records away, so the count cannot reach
           zero between the look and the subtraction. */
        if (atomic_load (&self->records) > 0)
            atomic_fetch_sub (&self->records, 1);
        return 1;
    }
io_error:;
    int saved = errno;
    fh_log_limited (&self->r_limit, FANHUB_LOG_ERROR, "%s/%s: cannot read: %s", self->dir, name,
                    strerror (saved));
    errno = saved;
    return -1;
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
    return fh_count_read (&self->counts.spool_corrupt);
}

uint64_t
fh_spool_lost (fh_spool_t *self)
{
    return fh_count_read (&self->counts.spool_lost);
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
        fh_sp_seg_name (name, seg);
        /* fdatasync flushes the file, whichever descriptor asks. */
        int fd = openat (self->dir_fd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
            continue; /* consumed and deleted already */
        if (fd < 0 || fh_fs_fdatasync (fd) != 0) {
            fh_error ("%s/%s: %s: %s", self->dir, name, fd < 0 ? "cannot open" : "fdatasync",
                      strerror (errno));
            rc = -1;
        }
        else
            fh_count_add (&self->counts.spool_fsyncs, 1);
        if (fd >= 0)
            close (fd);
    }
    if (dir && fh_sp_sync_dir (self) != 0)
        rc = -1;
    return rc;
}

int
fh_spool_tick (fh_spool_t *self, int64_t now_ns)
{
    int rc = 0;
    s_dir_remade (self); /* removed by hand: made again */
    if (self->fsync == FH_SPOOL_FSYNC_INTERVAL
        && now_ns - self->last_sync_ns >= self->fsync_interval_ns) {
        self->last_sync_ns = now_ns;
        rc = s_sync_appended (self);
    }
    pthread_mutex_lock (&self->cursor_lock);
    if (fh_sp_cursor_dirty (self) && now_ns - self->c_written_ns >= self->cursor_ns
        && now_ns >= self->c_retry_ns && fh_sp_cursor_write_making_room (self) != 0)
        rc = -1;
    fh_sp_delete_consumed (self);
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
    if (fh_sp_cursor_dirty (self))
        rc = fh_sp_cursor_write_making_room (self);
    if (rc != 0) {
        uint64_t again = self->c_pending;
        atomic_fetch_add (&s_unsaved_total, again);
        if (repeated)
            *repeated = again;
        fh_error ("%s/%s: cannot write the cursor at close: %llu done messages will be "
                  "delivered again by the next run",
                  self->dir, CURSOR_NAME, (unsigned long long) again);
    }
    fh_sp_delete_consumed (self);
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

const fh_consumer_counts_t *
fh_spool_tally (fh_spool_t *self)
{
    return &self->counts;
}

uint64_t
fh_spool_cursor_errors (fh_spool_t *self)
{
    return fh_count_read (&self->counts.spool_cursor_errors);
}

void
fh_spool_abandon (fh_spool_t **self_p)
{
    fh_spool_t *self = *self_p;
    if (!self)
        return;
    if (self->w_fd >= 0)
        close (self->w_fd);
    fh_sp_reader_free (&self->r);
    if (self->dir_fd >= 0)
        close (self->dir_fd);
    if (self->lock_fd >= 0)
        close (self->lock_fd); /* releases the flock */
    pthread_mutex_destroy (&self->lock);
    pthread_mutex_destroy (&self->cursor_lock);
    pthread_mutex_destroy (&self->dir_lock);
    free (self->w_buf);
    free (self->frames);
    free (self->known);
    free (self->marks);
    free (self->segs);
    free (self->tally);
    free (self->dir);
    free (self);
    *self_p = NULL;
}
