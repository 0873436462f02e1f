/*  log - the hub's own log lines, on stderr.

    One line per call. Under systemd (stderr is the JOURNAL_STREAM) each line starts
    with a syslog priority prefix ("<4>") that journald turns into the
    entry's level; on a terminal it reads "fanhub: warning: ...".
    fh_log_set_level drops lines less important than the level.
*/
#ifndef FH_LOG_H_INCLUDED
#define FH_LOG_H_INCLUDED

#include "fanhub/consumer.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void fh_log_set_level (fanhub_log_level_t level);
/* True when a line of this level is written: to skip the work of one
   that would not be (a debug line per message). */
bool fh_log_enabled (fanhub_log_level_t level);
/* True when stderr is the journal's stream (JOURNAL_STREAM names its
   device and inode): lines then start with syslog's <N> instead of
   "fanhub: LEVEL: ". Decided at the first call, then fixed. */
bool fh_log_to_journal (void);
void fh_log (fanhub_log_level_t level, const char *fmt, ...) FANHUB_PRINTF (2, 3);

/* The last FH_LOG_RECENT warnings and errors written (for the status
   page), oldest first: up to max into out; how many. Any thread. */
#define FH_LOG_RECENT 10
typedef struct {
    int64_t wall_ns; /* when, Unix time */
    fanhub_log_level_t level;
    char text[256]; /* without the prefix, cut to fit */
} fh_log_line_t;
size_t fh_log_recent (fh_log_line_t *out, size_t max);

#define fh_error(...) fh_log (FANHUB_LOG_ERROR, __VA_ARGS__)
#define fh_warning(...) fh_log (FANHUB_LOG_WARNING, __VA_ARGS__)
#define fh_info(...) fh_log (FANHUB_LOG_INFO, __VA_ARGS__)
#define fh_debug(...) fh_log (FANHUB_LOG_DEBUG, __VA_ARGS__)

#endif

#ifndef FH_LOG_RATELIMIT_DEFINED
#define FH_LOG_RATELIMIT_DEFINED
#include <stdbool.h>
#include <stdint.h>

/* At most one line per interval for a recurring problem; the lines that
   were held back are counted, so the next one can say how many. Owned by
   one thread. */
typedef struct {
    int64_t next_ns;     /* monotonic time of the next allowed line */
    uint64_t suppressed; /* lines held back since the last one */
} fh_ratelimit_t;

/* True when a line may be written now; then *suppressed gets how many were
   held back before it (and the count restarts). */
bool fh_ratelimit_allow (fh_ratelimit_t *self, int64_t now_ns, int64_t interval_ns,
                         uint64_t *suppressed);

/* The interval of fh_log_limited: one line per limiter every 10 s. */
#define FH_LOG_LIMIT_INTERVAL_NS (10 * INT64_C (1000000000))

/* A line of a recurring problem: written when limit allows (one line per
   FH_LOG_LIMIT_INTERVAL_NS), ending in " (N more like it not shown)" when
   lines were held back since the last one. Owned by one thread, as limit. */
void fh_log_limited (fh_ratelimit_t *limit, fanhub_log_level_t level, const char *fmt, ...)
    FANHUB_PRINTF (3, 4);
#endif
