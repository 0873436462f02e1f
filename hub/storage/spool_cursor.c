/*  spool_cursor - the spool's consumed position: the low-water mark over
    the records read and not yet done, the cursor file that persists it
    (written atomically, with room reserved for it ahead of a full disk),
    and the removal of the segments wholly consumed.
*/
#include "spool_internal.h"

#include "clock.h"
#include "crc32c.h"
#include "fs.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CURSOR_TAG "fanhub-spool-cursor 1 "

static void s_mark_advance (fh_spool_t *self);

static void
s_sub_saturating (atomic_uint_fast64_t *counter, uint64_t amount)
{
    uint_fast64_t old = atomic_load (counter);
    while (!atomic_compare_exchange_weak (counter, &old, old > amount ? old - amount : 0))
        ;
}

/* ---------------------------------------------------------------- cursor */

/* Here, the lowest of the spool's files, so that they call one way:
   syncs the directory, so that names created, renamed or removed in it
   survive a machine crash. */
int
fh_sp_sync_dir (fh_spool_t *self)
{
    char err[512];
    if (fh_fs_sync_dir (self->dir, self->dir_fd, err, sizeof err) == 0)
        return 0;
    int saved = errno;
    fh_error ("%s", err);
    errno = saved;
    return -1;
}

/* Reads the cursor file: 1 and the position, 0 when there is none or it
   is damaged (logged), -1 when it cannot be read (err). */
int
fh_sp_cursor_load (fh_spool_t *self, uint64_t *seg, uint64_t *off, char *err, size_t errlen)
{
    int fd = openat (self->dir_fd, CURSOR_NAME, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0) {
        snprintf (err, errlen, "%s/%s: cannot open: %s", self->dir, CURSOR_NAME, strerror (errno));
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
        snprintf (err, errlen, "%s/%s: cannot read: %s", self->dir, CURSOR_NAME, strerror (saved));
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
                    "(records may be delivered again)",
                    self->dir, CURSOR_NAME);
        return 0;
    }
    return 1;
}

/* Makes cursor.tmp again after a rename took it: one block, taken while
   the old cursor's block has just been freed. A failure only means the
   next write must find the room itself. */
void
fh_sp_cursor_reserve (fh_spool_t *self)
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
    int len = snprintf (text, sizeof text, CURSOR_TAG "%016" PRIx64 " %" PRIu64 " ", self->c_seg,
                        self->c_off);
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
            ok = fh_fs_fsync (fd) == 0;
        }
        int saved = errno;
        close (fd);
        errno = saved;
        if (ok) {
            if (renameat (self->dir_fd, CURSOR_TMP_NAME, self->dir_fd, CURSOR_NAME) == 0) {
                if (self->fsync == FH_SPOOL_FSYNC_ALWAYS)
                    fh_sp_sync_dir (self);
                self->c_written_seg = self->c_seg;
                self->c_written_off = self->c_off;
                self->c_written_valid = true;
                self->c_pending = 0;
                self->c_written_ns = fh_clock_mono_ns ();
                fh_sp_cursor_reserve (self);
                return 0;
            }
            what = "rename to cursor";
        }
    }
    int saved = errno;
    fh_count_add (&self->counts.spool_cursor_errors, 1);
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
    fh_sp_seg_name (name, doomed);
    fh_warning ("%s/%s: removed before the cursor could be written (the disk is full); "
                "if the hub stops before the cursor is written, the next run reports it "
                "missing",
                self->dir, name);
    return unlinkat (self->dir_fd, name, 0) == 0;
}

/* s_cursor_write; on a full disk, consumed segments are removed one at a
   time until it works or none is left. Under cursor_lock. */
int
fh_sp_cursor_write_making_room (fh_spool_t *self)
{
    int rc;
    while ((rc = s_cursor_write (self)) != 0 && errno == ENOSPC && s_free_one_consumed (self))
        ;
    return rc;
}

bool
fh_sp_cursor_dirty (const fh_spool_t *self)
{
    return !self->c_written_valid || self->c_seg != self->c_written_seg
           || self->c_off != self->c_written_off;
}

/* Deletes the segments below the written cursor's. Under cursor_lock. */
void
fh_sp_delete_consumed (fh_spool_t *self)
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
            fh_sp_seg_name (name, doomed[i]);
            if (unlinkat (self->dir_fd, name, 0) != 0 && errno != ENOENT)
                fh_log_limited (&self->c_limit, FANHUB_LOG_ERROR, "%s/%s: cannot remove: %s",
                                self->dir, name, strerror (errno));
        }
    } while (count == 64);
    self->deleted_below = below;
}

/* ---------------------------------------------------------------- read */

/* Appends a mark for a record just read, ending at (seg, off). Under
   cursor_lock. 0, or -1 when out of memory. */
int
fh_sp_mark_push (fh_spool_t *self, uint64_t seg, uint64_t off, uint64_t passed, uint64_t *mark)
{
    if (self->mark_count == self->mark_cap) {
        size_t cap = self->mark_cap ? self->mark_cap * 2 : 64;
        fh_sp_mark_t *marks = malloc (cap * sizeof *marks);
        if (!marks)
            return -1;
        for (size_t i = 0; i < self->mark_count; i++)
            marks[i] = self->marks[(self->mark_head + i) % self->mark_cap];
        free (self->marks);
        self->marks = marks;
        self->mark_cap = cap;
        self->mark_head = 0;
    }
    self->marks[(self->mark_head + self->mark_count) % self->mark_cap]
        = (fh_sp_mark_t){.seg = seg, .off = off, .passed = passed, .done = false};
    *mark = self->mark_base + self->mark_count;
    self->mark_count++;
    return 0;
}

/* Damage the reader skipped with no record after it (yet): a mark that
   is done already, so that the consumed position moves over the damage
   once every record before it is done, and a restart neither meets it
   again nor counts it twice. */
void
fh_sp_mark_skipped (fh_spool_t *self, fh_sp_reader_t *r)
{
    uint64_t mark;
    pthread_mutex_lock (&self->cursor_lock);
    if (fh_sp_mark_push (self, r->seg, r->off, r->passed, &mark) == 0) {
        self->marks[(self->mark_head + (mark - self->mark_base)) % self->mark_cap].done = true;
        r->passed = 0;
        s_mark_advance (self);
    }
    pthread_mutex_unlock (&self->cursor_lock);
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
        const fh_sp_mark_t *mark = &self->marks[self->mark_head];
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
    if (fh_sp_cursor_dirty (self)) {
        int64_t now = fh_clock_mono_ns ();
        bool due = self->c_seg != self->c_written_seg || self->c_pending >= self->cursor_records
                   || now - self->c_written_ns >= self->cursor_ns;
        if (due && now >= self->c_retry_ns)
            fh_sp_cursor_write_making_room (self);
    }
    fh_sp_delete_consumed (self);
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
fh_spool_window (fh_spool_t *self)
{
    pthread_mutex_lock (&self->cursor_lock);
    uint64_t window = self->mark_count;
    pthread_mutex_unlock (&self->cursor_lock);
    return window;
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
