/*  log - the hub's own log lines, on stderr. See log.h. */
#include "log.h"

#include "clock.h"

#include "fanhub/sdk.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static atomic_int s_level = FANHUB_LOG_INFO;
static atomic_int s_journal = -1; /* -1: not yet looked at */

/* The last warnings and errors, for the status page: a ring. */
static pthread_mutex_t s_recent_lock = PTHREAD_MUTEX_INITIALIZER;
static fh_log_line_t s_recent[FH_LOG_RECENT];
static size_t s_recent_next, s_recent_count;

static void
s_remember (fanhub_log_level_t level, const char *text, size_t len)
{
    pthread_mutex_lock (&s_recent_lock);
    fh_log_line_t *slot = &s_recent[s_recent_next];
    slot->wall_ns = fh_clock_mono_ns () + fh_clock_wall_offset_ns ();
    slot->level = level;
    /* Cut between characters: the status page's JSON refuses a split one. */
    len = fanhub_utf8_cut (text, len, sizeof slot->text - 1);
    memcpy (slot->text, text, len);
    slot->text[len] = '\0';
    s_recent_next = (s_recent_next + 1) % FH_LOG_RECENT;
    if (s_recent_count < FH_LOG_RECENT)
        s_recent_count++;
    pthread_mutex_unlock (&s_recent_lock);
}

size_t
fh_log_recent (fh_log_line_t *out, size_t max)
{
    pthread_mutex_lock (&s_recent_lock);
    size_t n = s_recent_count < max ? s_recent_count : max;
    for (size_t i = 0; i < n; i++)
        out[i] = s_recent[(s_recent_next + FH_LOG_RECENT - n + i) % FH_LOG_RECENT];
    pthread_mutex_unlock (&s_recent_lock);
    return n;
}

/* systemd.exec(5): JOURNAL_STREAM is "DEVICE:INODE" of the stream it
   connected; stderr is the journal only when it is that very stream (a
   child of the service with stderr redirected inherits the variable). */
static bool
s_stderr_is_journal (void)
{
    const char *stream = getenv ("JOURNAL_STREAM");
    unsigned long long device, inode;
    struct stat st;
    if (!stream || sscanf (stream, "%llu:%llu", &device, &inode) != 2
        || fstat (STDERR_FILENO, &st) != 0)
        return false;
    return (unsigned long long) st.st_dev == device && (unsigned long long) st.st_ino == inode;
}

bool
fh_log_to_journal (void)
{
    int journal = atomic_load (&s_journal);
    if (journal < 0) {
        journal = s_stderr_is_journal ();
        atomic_store (&s_journal, journal);
    }
    return journal;
}

void
fh_log_set_level (fanhub_log_level_t level)
{
    atomic_store (&s_level, (int) level);
}

bool
fh_log_enabled (fanhub_log_level_t level)
{
    return (int) level <= atomic_load (&s_level);
}

static const char *
s_level_name (fanhub_log_level_t level)
{
    switch (level) {
    case FANHUB_LOG_ERROR: return "error";
    case FANHUB_LOG_WARNING: return "warning";
    case FANHUB_LOG_INFO: return "info";
    case FANHUB_LOG_DEBUG: return "debug";
    }
    return "log";
}

static void s_logv (fanhub_log_level_t level, const char *fmt, va_list args) FANHUB_PRINTF (2, 0);

static void
s_logv (fanhub_log_level_t level, const char *fmt, va_list args)
{
    if ((int) level > atomic_load (&s_level))
        return;
    /* Format the whole line first: one write per line, so lines of
       different threads never interleave. */
    char line[2048];
    int prefix;
    if (fh_log_to_journal ())
        prefix = snprintf (line, sizeof line, "<%d>", (int) level);
    else
        prefix = snprintf (line, sizeof line, "fanhub: %s: ", s_level_name (level));
    /* A long line is cut between characters (fanhub_utf8_vformat). */
    size_t len
        = (size_t) prefix
          + fanhub_utf8_vformat (line + prefix, sizeof line - (size_t) prefix - 1, fmt, args);
    if (level <= FANHUB_LOG_WARNING)
        s_remember (level, line + prefix, len - (size_t) prefix);
    line[len++] = '\n';
    fwrite (line, 1, len, stderr);
}

void
fh_log (fanhub_log_level_t level, const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    s_logv (level, fmt, args);
    va_end (args);
}

bool
fh_ratelimit_allow (fh_ratelimit_t *self, int64_t now_ns, int64_t interval_ns, uint64_t *suppressed)
{
    if (now_ns < self->next_ns) {
        self->suppressed++;
        return false;
    }
    *suppressed = self->suppressed;
    self->suppressed = 0;
    self->next_ns = now_ns + interval_ns;
    return true;
}

void
fh_log_limited (fh_ratelimit_t *limit, fanhub_log_level_t level, const char *fmt, ...)
{
    uint64_t suppressed;
    if (!fh_ratelimit_allow (limit, fh_clock_mono_ns (), FH_LOG_LIMIT_INTERVAL_NS, &suppressed))
        return;
    char line[1024];
    va_list args;
    va_start (args, fmt);
    vsnprintf (line, sizeof line, fmt, args);
    va_end (args);
    if (suppressed)
        fh_log (level, "%s (%" PRIu64 " more like it not shown)", line, suppressed);
    else
        fh_log (level, "%s", line);
}
