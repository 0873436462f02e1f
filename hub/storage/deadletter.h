/*  deadletter - a consumer's dead-letter store: the messages it gave up on.

    When consume answers FANHUB_FAIL, or its retries are used up, the
    consumer writes the message here with why, how many attempts were made
    and when; `fanhub dead-letter list|show` reads the store offline and
    `fanhub dead-letter replay` puts entries back and removes them once
    accepted. Dead letters are rare, so the store is one small file per
    entry, written durably, in one directory (state_dir/CONSUMER/dead-letter):

        ID.dl   ID = 16 lowercase hex digits, unique and increasing within
                the store: the wall clock in microseconds, or one more than
                the last ID when the clock has not moved on (or went back)

    An entry's file is two records in the spool's framing (spool_record.h:
    16-byte self-checking header, CRC-32C of the payload) and nothing else:

      1. metadata, payload type 2, integers little-endian:
           0   1   type = 2
           1   3   zero
           4   4   attempts
           8   8   first attempt, wall clock, ns since the Unix epoch (signed)
          16   8   last attempt, the same
          24   4   reason length R (at most FH_DEADLETTER_MAX_REASON), then R
                   bytes of text
          ..   4   consumer name length C (at most 255), then C bytes
         and nothing after;
      2. the message, payload type 1, exactly as the spool stores it
         (sequence number, receive time, frames).

    add writes ".tmp-ID.dl", fsyncs it, links it to "ID.dl" (never
    replacing an entry), removes the temporary name and fsyncs the
    directory: once add answers, the entry survives a crash of the machine.
    remove unlinks and fsyncs the directory.

    Threads: add may be called from several threads at once (the
    consumer's workers); list, load and remove from any thread.
*/
#ifndef FH_DEADLETTER_H_INCLUDED
#define FH_DEADLETTER_H_INCLUDED

#include "fanhub/consumer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FH_DEADLETTER_SUBDIR "dead-letter" /* under state_dir/CONSUMER/ */
#define FH_DEADLETTER_ID_SIZE 17           /* 16 hex digits and a NUL */
#define FH_DEADLETTER_MAX_REASON 4096      /* longer reasons are cut */
#define FH_DEADLETTER_MAX_CONSUMER 255

typedef struct fh_deadletter fh_deadletter_t;

/* What add stores. */
typedef struct {
    uint64_t seq;
    int64_t received_wall_ns;     /* the hub's receive time, wall clock */
    const fanhub_bytes_t *frames; /* frame 0 the topic, 1 the body */
    uint32_t frame_count;         /* >= 1 */
    const char *reason;           /* text; NULL = none */
    uint32_t attempts;
    int64_t first_attempt_ns; /* wall clock */
    int64_t last_attempt_ns;
} fh_deadletter_item_t;

/* One entry as read back. When error is not NULL the entry's file could
   not be read (damaged, unreadable): only id and error are set. */
typedef struct {
    char id[FH_DEADLETTER_ID_SIZE];
    char *error;    /* "DIR/ID.dl: reason", one line */
    char *reason;   /* NUL-terminated; text as stored */
    char *consumer; /* NUL-terminated */
    uint32_t attempts;
    int64_t first_attempt_ns, last_attempt_ns;
    uint64_t seq;
    int64_t received_wall_ns;
    uint32_t frame_count;
    char *topic; /* frame 0, NUL-terminated (topic_len bytes
                               before the NUL, which may include others) */
    size_t topic_len;
    uint64_t body_bytes;    /* size of frame 1 (0 when there is none) */
    uint64_t total_bytes;   /* of all frames */
    fanhub_bytes_t *frames; /* load only (NULL in a list): frame_count
                               frames, valid until the entry is cleared */
    void *storage;          /* load only: the file's bytes, under frames */
} fh_deadletter_entry_t;

/* Opens the store in dir. With create, makes dir (and missing parents,
   0750) and removes temporary files an interrupted add left (older than
   an hour); without, a missing dir is an empty store. consumer is the
   name stored with each entry (NULL for a store only read). NULL on
   error, with one line in err naming the directory. */
fh_deadletter_t *fh_deadletter_open (const char *dir, const char *consumer, bool create, char *err,
                                     size_t errlen);
/* Safe with NULL and twice; nulls *self_p. */
void fh_deadletter_close (fh_deadletter_t **self_p);

/* Stores a message: 0 and its ID in id, or -1 with one line in err
   (naming the file and the reason; errno set). Thread-safe. */
int fh_deadletter_add (fh_deadletter_t *self, const fh_deadletter_item_t *item,
                       char id[FH_DEADLETTER_ID_SIZE], char *err, size_t errlen);

/* Every entry, sorted by ID (oldest first): 0, with *entries (free with
   fh_deadletter_entries_free) and *count; an entry that cannot be read is
   listed with its error. -1 with err when the directory cannot be read. */
int fh_deadletter_list (fh_deadletter_t *self, fh_deadletter_entry_t **entries, size_t *count,
                        char *err, size_t errlen);
void fh_deadletter_entries_free (fh_deadletter_entry_t *entries, size_t count);

/* Reads one entry: 0 and *entry filled (clear it with
   fh_deadletter_entry_clear), or -1 with err (errno ENOENT when there is
   no such entry, EINVAL when the ID is malformed, EBADMSG when damaged). */
int fh_deadletter_load (fh_deadletter_t *self, const char *id, fh_deadletter_entry_t *entry,
                        char *err, size_t errlen);
void fh_deadletter_entry_clear (fh_deadletter_entry_t *entry);

/* Removes one entry: 0, or -1 with err (errno ENOENT when there is none). */
int fh_deadletter_remove (fh_deadletter_t *self, const char *id, char *err, size_t errlen);

/* True when id is 16 lowercase hex digits. */
bool fh_deadletter_id_valid (const char *id);

#endif
