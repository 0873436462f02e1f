/*  crashlog - the messages that crashed the hub, kept in a consumer's
    state directory, so that a poison message is recognised at the next
    start instead of crashing the hub again and again.

    One file per consumer, state_dir/CONSUMER/crashes, one line per crash:

        fanhub-crash 1 SEQ CRC SIGNAL\n

    SEQ the message's hub sequence number (decimal; a spooled message keeps
    its own across restarts), CRC the CRC-32C of its topic and body frames
    (8 hex digits: a new message numbered like an old one after a restart
    is not the old one), SIGNAL the fatal signal's number. The crash
    handler (crash.c) appends a line with fh_crashlog_append, which is
    async-signal-safe: one write(2) of a line formatted on the stack, then
    fsync(2), on a descriptor opened here beforehand.

    At open the file is read into a table of messages with their crash
    counts. Bytes that are not records (a torn write, the zeros a machine
    crash can leave, anything else) are skipped up to the next record
    wherever it starts, with one warning that counts them. When the spool
    holds nothing (keep = false) no recorded message can come back, and
    the file is emptied. The file is refused (an error, nothing read,
    truncated or followed) unless it is a regular file of the hub's own
    user: a symbolic link, a FIFO (whose read would block the start), a
    device or a file of another user is not a crash record.
*/
#ifndef FH_CRASHLOG_H_INCLUDED
#define FH_CRASHLOG_H_INCLUDED

#include "fanhub/consumer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FH_CRASHLOG_NAME "crashes" /* in the consumer's state directory */

typedef struct fh_crashlog fh_crashlog_t;

/* Opens (creating, mode 0640) dir/crashes and reads its records; with
   keep false, empties it instead. NULL with err set on error, and when
   the name is taken by anything but a regular file of the hub's user. */
fh_crashlog_t *fh_crashlog_open (const char *dir, bool keep, char *err, size_t errlen);
/* Closes the file; safe with NULL and twice; nulls *self_p. */
void fh_crashlog_close (fh_crashlog_t **self_p);
/* The descriptor the crash handler appends to (open until close). */
int fh_crashlog_fd (const fh_crashlog_t *self);

/* Distinct messages recorded at open. */
size_t fh_crashlog_messages (const fh_crashlog_t *self);
/* The i-th of them (i < fh_crashlog_messages): its seq, crash count and
   the signal of its last crash. */
void fh_crashlog_at (const fh_crashlog_t *self, size_t i, uint64_t *seq, uint32_t *crashes,
                     int *last_signal);
/* Crashes recorded at open for the message (seq, crc); 0 when none, else
   the count, and *last_signal (if not NULL) the signal of the last one. */
uint32_t fh_crashlog_crashes (const fh_crashlog_t *self, uint64_t seq, uint32_t crc,
                              int *last_signal);

/* Async-signal-safe. The identity of a message: CRC-32C of its topic,
   then its body. */
uint32_t fh_crashlog_identity (fanhub_bytes_t topic, fanhub_bytes_t body);
/* Async-signal-safe. Appends one record to fd and syncs it; -1 when the
   write failed (nothing else can be done in a crash handler). */
int fh_crashlog_append (int fd, uint64_t seq, uint32_t crc, int sig);
/* Async-signal-safe. "SIGSEGV" for 11, and so on for the fatal signals
   the hub handles; "a fatal signal" otherwise. */
const char *fh_crashlog_signal_name (int sig);

#endif
