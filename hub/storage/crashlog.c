/*  crashlog - the messages that crashed the hub. See crashlog.h. */
#include "crashlog.h"

#include "crc32c.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Past this the file is not read (each crash adds about 40 bytes): its
   messages are not recognised, and it is emptied with a warning. */
#define CRASHLOG_MAX_BYTES (16u * 1024 * 1024)

typedef struct {
    uint64_t seq;
    uint32_t crc;
    uint32_t crashes;
    int last_signal;
    size_t line; /* of the last crash, for its signal */
} s_entry_t;

struct fh_crashlog {
    char *path;
    int fd;
    s_entry_t *entries; /* sorted by (seq, crc) */
    size_t count;
};

static int
s_by_key (const void *a, const void *b)
{
    const s_entry_t *x = a, *y = b;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    if (x->crc != y->crc)
        return x->crc < y->crc ? -1 : 1;
    return (x->line > y->line) - (x->line < y->line);
}

#define RECORD_MAGIC "fanhub-crash 1 "
#define RECORD_MAGIC_LEN (sizeof RECORD_MAGIC - 1)
/* The shortest record: magic, a digit, 8 hex digits, a digit, spaces. */
#define RECORD_MIN (RECORD_MAGIC_LEN + 1 + 1 + 8 + 1 + 1)

/* The next RECORD_MAGIC in [p, end), or NULL. memchr for its first byte,
   then a compare: memmem's sanitizer interceptors check the whole rest
   of the buffer at every call, which made a 15 MiB record quadratic. */
static const char *
s_find_magic (const char *p, const char *end)
{
    while ((size_t) (end - p) >= RECORD_MAGIC_LEN && (p = memchr (p, 'f', (size_t) (end - p)))) {
        if ((size_t) (end - p) < RECORD_MAGIC_LEN)
            return NULL;
        if (memcmp (p, RECORD_MAGIC, RECORD_MAGIC_LEN) == 0)
            return p;
        p++;
    }
    return NULL;
}

/* A decimal number at p, no sign, at most max: where it ends, or NULL. */
static const char *
s_decimal (const char *p, const char *end, uint64_t max, uint64_t *out)
{
    const char *start = p;
    uint64_t value = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        unsigned digit = (unsigned) (*p - '0');
        if (value > (max - digit) / 10)
            return NULL;
        value = value * 10 + digit;
    }
    *out = value;
    return p > start ? p : NULL;
}

/* The record that starts at p (with RECORD_MAGIC) into entry: its length
   with its newline (a last record may lack one), or 0 when the bytes are
   not a whole record (torn, another version, trailing bytes). */
static size_t
s_record (const char *p, const char *end, s_entry_t *entry)
{
    const char *q = p + RECORD_MAGIC_LEN;
    uint64_t seq, sig, crc = 0;
    if (!(q = s_decimal (q, end, UINT64_MAX, &seq)) || q == end || *q++ != ' ')
        return 0;
    for (int i = 0; i < 8; i++, q++) {
        int digit = q == end                 ? -1
                    : *q >= '0' && *q <= '9' ? *q - '0'
                    : *q >= 'a' && *q <= 'f' ? *q - 'a' + 10
                    : *q >= 'A' && *q <= 'F' ? *q - 'A' + 10
                                             : -1;
        if (digit < 0)
            return 0;
        crc = crc * 16 + (uint64_t) digit;
    }
    if (q == end || *q++ != ' ' || !(q = s_decimal (q, end, INT_MAX, &sig)))
        return 0;
    if (q < end && *q++ != '\n')
        return 0;
    entry->seq = seq;
    entry->crc = (uint32_t) crc;
    entry->last_signal = (int) sig;
    return (size_t) (q - p);
}

/* The records of the size bytes at text into self->entries, one entry
   per message. Bytes that are not records (a torn write, zeros a crash
   of the machine left, anything else) are skipped up to the next record,
   wherever it starts, and counted: one warning says how many. */
static int
s_parse (fh_crashlog_t *self, const char *text, size_t size, char *err, size_t errlen)
{
    size_t skipped = 0, torn = 0, n = 0;
    self->entries = calloc (size / RECORD_MIN + 1, sizeof *self->entries);
    if (!self->entries) {
        snprintf (err, errlen, "%s: out of memory", self->path);
        return -1;
    }
    const char *p = text, *end = text + size;
    while (p < end) {
        const char *found = s_find_magic (p, end);
        skipped += (size_t) ((found ? found : end) - p);
        if (!found)
            break;
        s_entry_t entry = {0};
        size_t len = s_record (found, end, &entry);
        if (!len) {
            torn++;
            skipped++; /* the rest of it is counted up to the next record */
            p = found + 1;
            continue;
        }
        entry.crashes = 1;
        entry.line = n;
        self->entries[n++] = entry;
        p = found + len;
    }
    if (skipped)
        fh_warning ("%s: %zu bytes that are not crash records skipped (%zu torn records among "
                    "them); %zu records read",
                    self->path, skipped, torn, n);
    qsort (self->entries, n, sizeof *self->entries, s_by_key);
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        s_entry_t *last = out ? &self->entries[out - 1] : NULL;
        if (last && last->seq == self->entries[i].seq && last->crc == self->entries[i].crc) {
            last->crashes++;
            last->last_signal = self->entries[i].last_signal; /* sorted by line last */
        }
        else
            self->entries[out++] = self->entries[i];
    }
    self->count = out;
    return 0;
}

/* Opens the record without following a link and without waiting (a FIFO
   would block a read forever), and keeps it only when it is a regular
   file of the hub's own user: a link could point the appends and the
   emptying at any file, and a file someone else owns is not ours to
   trust or empty. The descriptor is blocking again afterwards. */
static int
s_open_checked (fh_crashlog_t *self, char *err, size_t errlen)
{
    self->fd = open (self->path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                     0640);
    if (self->fd < 0) {
        if (errno == ELOOP)
            snprintf (err, errlen,
                      "%s: a symbolic link: refused (neither followed nor emptied; remove it)",
                      self->path);
        else
            snprintf (err, errlen, "%s: cannot open: %s", self->path, strerror (errno));
        return -1;
    }
    struct stat st;
    if (fstat (self->fd, &st) != 0) {
        snprintf (err, errlen, "%s: cannot stat: %s", self->path, strerror (errno));
        return -1;
    }
    if (!S_ISREG (st.st_mode)) {
        snprintf (err, errlen, "%s: not a regular file (%s): refused (remove it)", self->path,
                  S_ISFIFO (st.st_mode)   ? "a FIFO"
                  : S_ISSOCK (st.st_mode) ? "a socket"
                  : S_ISCHR (st.st_mode)  ? "a character device"
                  : S_ISBLK (st.st_mode)  ? "a block device"
                  : S_ISDIR (st.st_mode)  ? "a directory"
                                          : "not a file");
        return -1;
    }
    if (st.st_uid != geteuid ()) {
        snprintf (err, errlen,
                  "%s: owned by uid %lu, not by the hub's user (uid %lu): refused (remove it)",
                  self->path, (unsigned long) st.st_uid, (unsigned long) geteuid ());
        return -1;
    }
    int flags = fcntl (self->fd, F_GETFL);
    if (flags < 0 || fcntl (self->fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        snprintf (err, errlen, "%s: cannot set blocking: %s", self->path, strerror (errno));
        return -1;
    }
    return 0;
}

/* The whole file through fd (the one checked: never the name again),
   malloc'd in *text; 1 when longer than CRASHLOG_MAX_BYTES (not read),
   -1 with why set on error. */
static int
s_read (fh_crashlog_t *self, char **text, size_t *size, char *why, size_t whylen)
{
    struct stat st;
    *text = NULL;
    if (fstat (self->fd, &st) != 0) {
        snprintf (why, whylen, "cannot stat: %s", strerror (errno));
        return -1;
    }
    if ((uint64_t) st.st_size > CRASHLOG_MAX_BYTES) {
        snprintf (why, whylen, "longer than %u bytes", CRASHLOG_MAX_BYTES);
        return 1;
    }
    size_t want = (size_t) st.st_size, got = 0;
    if (!(*text = malloc (want + 1))) {
        snprintf (why, whylen, "out of memory");
        return -1;
    }
    while (got < want) {
        ssize_t n = pread (self->fd, *text + got, want - got, (off_t) got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf (why, whylen, "cannot read: %s", strerror (errno));
            free (*text);
            *text = NULL;
            return -1;
        }
        if (n == 0)
            break; /* shorter than it was: what is there */
        got += (size_t) n;
    }
    *size = got;
    return 0;
}

fh_crashlog_t *
fh_crashlog_open (const char *dir, bool keep, char *err, size_t errlen)
{
    fh_crashlog_t *self = calloc (1, sizeof *self);
    size_t len = strlen (dir) + sizeof FH_CRASHLOG_NAME + 1;
    if (!self || !(self->path = malloc (len))) {
        snprintf (err, errlen, "%s: out of memory", dir);
        free (self);
        return NULL;
    }
    self->fd = -1;
    snprintf (self->path, len, "%s/%s", dir, FH_CRASHLOG_NAME);
    if (s_open_checked (self, err, errlen) != 0) {
        fh_crashlog_close (&self);
        return NULL;
    }
    char why[1024];
    char *text = NULL;
    size_t size = 0;
    int got = keep ? s_read (self, &text, &size, why, sizeof why) : 1;
    if (keep && got != 0)
        fh_warning ("%s: not read, emptied: %s", self->path, why);
    int rc = got == 0 ? s_parse (self, text, size, err, errlen) : 0;
    free (text);
    if (rc == 0 && got != 0 && ftruncate (self->fd, 0) != 0) {
        snprintf (err, errlen, "%s: cannot empty: %s", self->path, strerror (errno));
        rc = -1;
    }
    if (rc != 0)
        fh_crashlog_close (&self);
    return self;
}

void
fh_crashlog_close (fh_crashlog_t **self_p)
{
    fh_crashlog_t *self = *self_p;
    if (!self)
        return;
    if (self->fd >= 0)
        close (self->fd);
    free (self->entries);
    free (self->path);
    free (self);
    *self_p = NULL;
}

int
fh_crashlog_fd (const fh_crashlog_t *self)
{
    return self->fd;
}

size_t
fh_crashlog_messages (const fh_crashlog_t *self)
{
    return self->count;
}

void
fh_crashlog_at (const fh_crashlog_t *self, size_t i, uint64_t *seq, uint32_t *crashes,
                int *last_signal)
{
    *seq = self->entries[i].seq;
    *crashes = self->entries[i].crashes;
    *last_signal = self->entries[i].last_signal;
}

uint32_t
fh_crashlog_crashes (const fh_crashlog_t *self, uint64_t seq, uint32_t crc, int *last_signal)
{
    size_t lo = 0, hi = self->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const s_entry_t *e = &self->entries[mid];
        if (e->seq < seq || (e->seq == seq && e->crc < crc))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == self->count || self->entries[lo].seq != seq || self->entries[lo].crc != crc)
        return 0;
    if (last_signal)
        *last_signal = self->entries[lo].last_signal;
    return self->entries[lo].crashes;
}

uint32_t
fh_crashlog_identity (fanhub_bytes_t topic, fanhub_bytes_t body)
{
    return fh_crc32c (fh_crc32c (0, topic.data, topic.size), body.data, body.size);
}

/* Writes value in base (10 or 16, at least `width` digits) ending at end;
   returns where it starts. */
static char *
s_digits (char *end, uint64_t value, unsigned base, int width)
{
    do {
        *--end = "0123456789abcdef"[value % base];
        value /= base;
        width--;
    } while (value || width > 0);
    return end;
}

int
fh_crashlog_append (int fd, uint64_t seq, uint32_t crc, int sig)
{
    char line[80];
    size_t used = 0;
    const char *parts[] = {"fanhub-crash 1 ", NULL, " ", NULL, " ", NULL, "\n"};
    char seq_text[24], crc_text[12], sig_text[12];
    seq_text[23] = crc_text[11] = sig_text[11] = '\0';
    parts[1] = s_digits (seq_text + 23, seq, 10, 1);
    parts[3] = s_digits (crc_text + 11, crc, 16, 8);
    parts[5] = s_digits (sig_text + 11, sig > 0 ? (uint64_t) sig : 0, 10, 1);
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        for (const char *p = parts[i]; *p && used < sizeof line; p++)
            line[used++] = *p;
    if (write (fd, line, used) != (ssize_t) used)
        return -1;
    return fsync (fd);
}

const char *
fh_crashlog_signal_name (int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    default: return "a fatal signal";
    }
}
