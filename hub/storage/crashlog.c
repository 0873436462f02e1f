/*  crashlog - the messages that crashed the hub. See crashlog.h. */
#include "crashlog.h"

#include "crc32c.h"
#include "fs.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The records of text into self->entries, one entry per message. */
static int
s_parse (fh_crashlog_t *self, char *text, char *err, size_t errlen)
{
    size_t lines = 1, bad = 0, n = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    self->entries = calloc (lines, sizeof *self->entries);
    if (!self->entries) {
        snprintf (err, errlen, "%s: out of memory", self->path);
        return -1;
    }
    char *save = NULL;
    for (char *line = strtok_r (text, "\n", &save); line; line = strtok_r (NULL, "\n", &save)) {
        unsigned long long seq;
        unsigned crc;
        int sig, used = 0;
        if (sscanf (line, "fanhub-crash 1 %llu %8x %d%n", &seq, &crc, &sig, &used) != 3
            || line[used] != '\0') {
            bad++; /* a torn write, or not ours */
            continue;
        }
        self->entries[n] = (s_entry_t){seq, crc, 1, sig, n};
        n++;
    }
    if (bad)
        fh_warning ("%s: %zu lines that are not crash records skipped", self->path, bad);
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
    snprintf (self->path, len, "%s/%s", dir, FH_CRASHLOG_NAME);
    self->fd = open (self->path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (self->fd < 0) {
        snprintf (err, errlen, "%s: cannot open: %s", self->path, strerror (errno));
        fh_crashlog_close (&self);
        return NULL;
    }
    char why[1024];
    size_t size = 0;
    char *text = keep ? fh_fs_read_file (self->path, CRASHLOG_MAX_BYTES, &size, why, sizeof why)
                      : NULL;
    if (keep && !text)
        fh_warning ("%s: not read, emptied: %s", self->path, why);
    bool read = text != NULL;
    int rc = read ? s_parse (self, text, err, errlen) : 0;
    free (text);
    if (rc == 0 && !read && ftruncate (self->fd, 0) != 0) {
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
