/*  spool_segment - the spool's segment files: their names and listing,
    the buffered reader that parses them record by record, damage
    counting, and the scan at open that recovers the spool's state.

    Damage is counted once. The start-up scan and the reader parse the
    same bytes from the same position with the deterministic
    fh_record_parse, so they meet the same damaged records and regions at
    the same offsets: the scan counts them and remembers where they start
    (`known`), and the reader does not count those again.
*/
#include "spool_internal.h"

#include "clock.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_CHUNK (256u * 1024)

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

/* ---------------------------------------------------------------- reader */

void
fh_sp_reader_init (fh_sp_reader_t *r, uint64_t seg, uint64_t off)
{
    memset (r, 0, sizeof *r);
    r->fd = -1;
    r->seg = seg;
    r->off = off;
    r->start = off;
}

void
fh_sp_reader_free (fh_sp_reader_t *r)
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
s_parse_next (fh_sp_reader_t *r, fh_record_status_t *status, size_t *size, const uint8_t **payload,
              uint32_t *payload_len)
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
s_pos_less (fh_sp_pos_t a, fh_sp_pos_t b)
{
    return a.seg < b.seg || (a.seg == b.seg && a.off < b.off);
}

/* Counts damage starting at (seg, off) once: the scan records it, the
   reader skips what the scan recorded. `what` names it for the log; NULL
   for a torn end, which the scan reports as it cuts it. */
static void
s_damage (fh_spool_t *self, uint64_t seg, uint64_t off, bool scanning, const char *what)
{
    fh_sp_pos_t pos = {seg, off};
    if (scanning) {
        if (self->known_count == self->known_cap) {
            size_t cap = self->known_cap ? self->known_cap * 2 : 16;
            fh_sp_pos_t *known = realloc (self->known, cap * sizeof *known);
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
    fh_count_add (&self->counts.spool_corrupt, 1);
    if (what) {
        char name[SEG_NAME_LEN + 1];
        fh_sp_seg_name (name, seg);
        fh_log_limited (&self->r_limit, FANHUB_LOG_WARNING,
                        "%s/%s: %s at offset %" PRIu64 ": skipped", self->dir, name, what, off);
    }
}

/* Moves r past damage, counting it, to the next message record: 1 with r
   at it (not yet passed) and *size its length; 0 at the end of what may
   be read; -1 with errno on a read error. At the end, r->region_start is
   where damage running to the end began, or NONE. */
int
fh_sp_step (fh_spool_t *self, fh_sp_reader_t *r, bool scanning, const uint8_t **payload,
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
            if (fh_record_decode_message (*payload, *payload_len, &seq, &wall, &frames, NULL, 0)
                && frames >= 2) {
                r->in_region = false;
                return 1;
            }
            /* Verified but not a message: damaged all the same. */
            s_damage (self, r->seg, r->off, scanning, "malformed message record");
            r->in_region = false;
            r->taken++; /* counted as damage, not as lost */
            break;
        case FH_RECORD_BAD:
            s_damage (self, r->seg, r->off, scanning, "record with a bad checksum");
            r->in_region = false;
            r->taken++;
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
                r->taken++;
            }
            r->in_region = false;
            r->off += *size;
            r->passed += *size;
            return 0;
        case FH_RECORD_NEED: assert (false); break;
        }
        r->off += *size;
        r->passed += *size;
    }
}

/* ---------------------------------------------------------------- tally */

int
fh_sp_tally_add (fh_spool_t *self, uint64_t seg, uint64_t records, uint64_t bytes)
{
    fh_sp_tally_t *last = self->tally_count ? &self->tally[self->tally_count - 1] : NULL;
    if (last && last->seg == seg) {
        last->records += records;
        last->bytes += bytes;
        return 0;
    }
    if (self->tally_count == self->tally_cap) {
        size_t cap = self->tally_cap ? self->tally_cap * 2 : 16;
        fh_sp_tally_t *tally = realloc (self->tally, cap * sizeof *tally);
        if (!tally)
            return -1;
        self->tally = tally;
        self->tally_cap = cap;
    }
    self->tally[self->tally_count++] = (fh_sp_tally_t){seg, records, bytes};
    return 0;
}

static void
s_sub_floor (atomic_uint_fast64_t *counter, uint64_t amount)
{
    uint64_t old = atomic_load (counter);
    while (!atomic_compare_exchange_weak (counter, &old, old > amount ? old - amount : 0))
        ;
}

uint64_t
fh_sp_tally_leave (fh_spool_t *self)
{
    fh_sp_reader_t *r = &self->r;
    fh_sp_tally_t left = {r->seg, 0, 0};
    pthread_mutex_lock (&self->lock);
    size_t gone = 0;
    while (gone < self->tally_count && self->tally[gone].seg <= r->seg) {
        if (self->tally[gone].seg == r->seg)
            left = self->tally[gone];
        gone++;
    }
    memmove (self->tally, self->tally + gone, (self->tally_count - gone) * sizeof *self->tally);
    self->tally_count -= gone;
    pthread_mutex_unlock (&self->lock);
    uint64_t read = r->off > r->start ? r->off - r->start : 0;
    if (left.records <= r->taken)
        return 0;
    uint64_t lost = left.records - r->taken;
    /* Never read back, so never counted out of the waiting figures. */
    fh_count_add (&self->counts.spool_lost, lost);
    s_sub_floor (&self->records, lost);
    s_sub_floor (&self->bytes, left.bytes > read ? left.bytes - read : 0);
    return lost;
}

/* ---------------------------------------------------------------- open */

static int
s_seg_cmp (const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

int
fh_sp_segs_push (fh_spool_t *self, uint64_t seg)
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

/* True when the entry is a regular file (a stray directory or link named
   like a segment is not one). */
static bool
s_regular (fh_spool_t *self, const struct dirent *entry)
{
    if (entry->d_type != DT_UNKNOWN)
        return entry->d_type == DT_REG;
    struct stat st;
    return fstatat (self->dir_fd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0
           && S_ISREG (st.st_mode);
}

/* Numbers of things named like segments that are not (a directory):
   never read, never counted missing; the writer passes over them (s_roll
   finds the name taken). */
typedef struct {
    uint64_t numbers[64]; /* more are warned about, not remembered */
    size_t count;
} s_strays_t;

static bool
s_is_stray (const s_strays_t *strays, uint64_t seg)
{
    for (size_t i = 0; i < strays->count; i++)
        if (strays->numbers[i] == seg)
            return true;
    return false;
}

/* The segment files, ascending, and the strays. */
static int
s_list_segments (fh_spool_t *self, s_strays_t *strays, char *err, size_t errlen)
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
    while ((entry = readdir (dir))) {
        const char *name = entry->d_name;
        if (!s_seg_parse (name, &seg)) {
            size_t len = strlen (name);
            if (strncmp (name, "seg-", 4) == 0
                || (len >= 6 && strcmp (name + len - 6, ".spool") == 0))
                fh_warning ("%s/%s: not a segment's name: ignored", self->dir, name);
            continue;
        }
        if (!s_regular (self, entry)) {
            /* Never read, and its number never taken by the writer. */
            fh_warning ("%s/%s: named like a segment, but not a regular file: ignored", self->dir,
                        name);
            if (strays->count < sizeof strays->numbers / sizeof *strays->numbers)
                strays->numbers[strays->count++] = seg;
            continue;
        }
        if (fh_sp_segs_push (self, seg) != 0) {
            closedir (dir);
            snprintf (err, errlen, "%s: out of memory", self->dir);
            return -1;
        }
    }
    closedir (dir);
    if (self->seg_count)
        qsort (self->segs, self->seg_count, sizeof *self->segs, s_seg_cmp);
    return 0;
}

/* A segment cut below the cursor, or emptied (not the last): records
   were lost, how many is not known: counted once. */
static void
s_cut_before_open (fh_spool_t *self, const char *name, uint64_t off, uint64_t size)
{
    fh_count_add (&self->counts.spool_lost, 1);
    if (off > size)
        fh_warning ("%s/%s: %" PRIu64 " bytes long, but the cursor is at offset %" PRIu64
                    ": records after it were lost",
                    self->dir, name, size, off);
    else
        fh_warning ("%s/%s: empty, but not the last segment: the records it held are lost",
                    self->dir, name);
}

/* Reads segment seg from off to its end: counts its records and bytes and
   its damage, and truncates damage that runs to its end. */
static int
s_scan_segment (fh_spool_t *self, uint64_t seg, uint64_t off, bool last, uint64_t *file_size,
                char *err, size_t errlen)
{
    char name[SEG_NAME_LEN + 1];
    fh_sp_seg_name (name, seg);
    fh_sp_reader_t r;
    fh_sp_reader_init (&r, seg, off);
    r.fd = openat (self->dir_fd, name, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (r.fd < 0 || fstat (r.fd, &st) != 0) {
        snprintf (err, errlen, "%s/%s: cannot open: %s", self->dir, name, strerror (errno));
        fh_sp_reader_free (&r);
        return -1;
    }
    r.limit = (uint64_t) st.st_size;
    r.sealed = r.limit_known = true;
    *file_size = r.limit;
    if (off > r.limit || (r.limit == 0 && !last)) {
        s_cut_before_open (self, name, off, r.limit);
        fh_sp_reader_free (&r);
        return 0;
    }
    uint64_t records = 0;
    int rc;
    const uint8_t *payload;
    uint32_t payload_len;
    size_t size;
    while ((rc = fh_sp_step (self, &r, true, &payload, &payload_len, &size)) == 1) {
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
        fh_sp_reader_free (&r);
        return -1;
    }
    uint64_t end = r.limit;
    if (r.region_start != NONE) {
        /* A torn write, or damage to the end: cut it off, so that appends
           never follow it and the reader never meets it again. */
        if (ftruncate (r.fd, (off_t) r.region_start) != 0) {
            snprintf (err, errlen, "%s/%s: cannot truncate to %" PRIu64 " bytes: %s", self->dir,
                      name, r.region_start, strerror (errno));
            fh_sp_reader_free (&r);
            return -1;
        }
        fh_warning ("%s/%s: cut %" PRIu64 " bytes of a torn or damaged record at offset "
                    "%" PRIu64,
                    self->dir, name, end - r.region_start, r.region_start);
        end = r.region_start;
        /* The scan remembered where it began; the reader will not meet it. */
        if (self->known_count && self->known[self->known_count - 1].seg == seg
            && self->known[self->known_count - 1].off == r.region_start)
            self->known_count--;
    }
    fh_sp_reader_free (&r);
    atomic_fetch_add (&self->records, records);
    if (end > off)
        atomic_fetch_add (&self->bytes, end - off);
    if (fh_sp_tally_add (self, seg, records, end > off ? end - off : 0) != 0) {
        snprintf (err, errlen, "%s: out of memory", self->dir);
        return -1;
    }
    return 0;
}

/* Records lost before open, counted and logged: segments are numbered
   without gaps from the cursor's on (the writer starts at the cursor's
   segment when it is not there yet, then takes the next number, and only
   segments below the written cursor are ever deleted), so a number
   missing from there on is a lost segment, counted once (how many records
   it held is not known); so is the cursor's own segment when the cursor
   points inside it and it was the last. */
static void
s_count_missing (fh_spool_t *self, const s_strays_t *strays, bool found, uint64_t c_seg,
                 uint64_t c_off)
{
    char name[SEG_NAME_LEN + 1];
    uint64_t expect = self->seg_count ? self->segs[0] : 0;
    if (found)
        expect = c_seg;
    for (size_t i = 0; i <= self->seg_count && (found || i < self->seg_count); i++) {
        /* Past the last: only the cursor's own segment, if it had data. */
        uint64_t upto = i < self->seg_count ? self->segs[i] : (c_off > 0 ? c_seg + 1 : c_seg);
        for (; expect < upto; expect++) {
            if (s_is_stray (strays, expect))
                continue; /* the writer passed over it */
            fh_count_add (&self->counts.spool_lost, 1);
            fh_sp_seg_name (name, expect);
            fh_warning ("%s/%s: missing: the records it held are lost", self->dir, name);
        }
        if (i < self->seg_count)
            expect = self->segs[i] + 1;
    }
}

/* A cursor that names a segment past the last one there is, beyond the
   one the writer would have started next (or inside that one): no run
   wrote it for these segments. Not believed: they are read from the
   start (what was consumed of them is delivered again), never deleted
   as consumed. True when so. */
static bool
s_cursor_too_far (fh_spool_t *self, uint64_t c_seg, uint64_t c_off)
{
    if (self->seg_count == 0)
        return false;
    uint64_t last = self->segs[self->seg_count - 1];
    if (c_seg <= last || (c_seg == last + 1 && c_off == 0))
        return false;
    char name[SEG_NAME_LEN + 1];
    fh_sp_seg_name (name, last);
    fh_warning ("%s/%s: names segment %" PRIu64 " offset %" PRIu64 ", past the last segment "
                "(%s): not believed; the %zu segments there are read from the start (what was "
                "consumed of them comes again)",
                self->dir, CURSOR_NAME, c_seg, c_off, name, self->seg_count);
    return true;
}

/* The recovery at open (fh_spool_open): the cursor, the segments below
   it removed (a crash came between the cursor's write and their
   removal), the lost ones counted, the rest scanned. */
int
fh_sp_recover (fh_spool_t *self, char *err, size_t errlen)
{
    const char *dir = self->dir;
    uint64_t c_seg = 0, c_off = 0;
    s_strays_t strays = {.count = 0};
    int found = fh_sp_cursor_load (self, &c_seg, &c_off, err, errlen);
    if (found < 0 || s_list_segments (self, &strays, err, errlen) != 0)
        return -1;
    const uint64_t file_seg = c_seg, file_off = c_off;
    if (found && s_cursor_too_far (self, c_seg, c_off))
        found = 0;
    /* Segments below the cursor's were consumed: a crash came between the
       cursor's write and their removal. */
    size_t first = 0;
    if (found)
        while (first < self->seg_count && self->segs[first] < c_seg) {
            char name[SEG_NAME_LEN + 1];
            fh_sp_seg_name (name, self->segs[first]);
            if (unlinkat (self->dir_fd, name, 0) != 0 && errno != ENOENT)
                fh_warning ("%s/%s: cannot remove: %s", dir, name, strerror (errno));
            first++;
        }
    if (first) {
        memmove (self->segs, self->segs + first, (self->seg_count - first) * sizeof *self->segs);
        self->seg_count -= first;
    }
    s_count_missing (self, &strays, found != 0, c_seg, c_off);
    /* The writer's first segment: past every segment, and the cursor's
       own when it was never made (so that the segments from the cursor's
       on have no gaps: a gap is a loss), past it when it had data. */
    uint64_t last = self->seg_count ? self->segs[self->seg_count - 1] : 0;
    self->w_seg = last + 1;
    if (found && c_seg > last)
        self->w_seg = c_off > 0 ? c_seg + 1 : c_seg;
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
            return -1;
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
    fh_sp_reader_init (&self->r, c_seg, c_off);
    self->mark_base = 1;
    return 0;
}
