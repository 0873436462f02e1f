/*  message - one bus message as the hub holds it, shared by its consumers.

    The enqueuer receives the frames (zmq_msg_t, whose buffers libzmq owns
    and reference-counts), wraps them once in an fh_msg_t with a sequence
    number and receive time, and hands the same pointer to every matching
    consumer: no payload is copied per consumer, nor at all. The message
    carries a count of the consumers still holding it; the last one to
    release it frees it. This is `struct fanhub_msg` of the plugin ABI.
*/
#ifndef FH_MESSAGE_H_INCLUDED
#define FH_MESSAGE_H_INCLUDED

#include "fanhub/consumer.h"
#include "histogram.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <zmq.h>

typedef struct fanhub_msg fh_msg_t;
typedef struct fh_emit fh_emit_t; /* someone waiting for this message (emit.h) */

/* A spilled message is not done when it is written: it is done when its
   copy read back from the spool is. A deferral carries what the original
   owes its completion (the handled count, the emit waiter) until the
   original and every spooled copy of it are released. */
typedef struct {
    atomic_uint refs; /* the original, plus each copy not yet done */
    fh_emit_t *emit;  /* taken from the original, or NULL */
    int64_t received_ns;
} fh_deferral_t;

struct fanhub_msg {
    atomic_uint holders;  /* consumers that have not released it */
    uint32_t frame_count; /* >= 2: topic, body, extra frames */
    uint64_t seq;         /* hub sequence number, from 1 */
    int64_t received_ns;  /* CLOCK_MONOTONIC at receipt */
    union {
        fh_emit_t *emit;     /* NULL, or told when the message is handled */
        fh_msg_t *next_free; /* released to the cache (message.c) */
    };
    bool from_spool;         /* a copy read back from a spool: its original
                                was counted as handled when spilled */
    bool cached;             /* a shell from the cache (fh_msg_shell): goes back there */
    uint32_t room;           /* frames[] has room for this many (>= frame_count) */
    uint64_t spool_mark;     /* a copy read back from a spool: its record's
                                mark (fh_spool_done once done), else 0 */
    fh_deferral_t *deferral; /* spilled (the original) or a copy of one: its
                                completion waits for every copy; or NULL */
    uint64_t bytes;          /* the frames' sizes added up: what a queue
                                holds, counted at the offer and the pop */
    zmq_msg_t frames[];
};

/* Completion: a message is *handled* when its last holder releases it
   (every consumer it went to has completed, failed, dropped or replaced
   it). The thread that releases it last records that here: a count and
   the receive-to-handled latency. One writer per fh_handled_t. */
typedef struct {
    atomic_uint_fast64_t handled;
    fh_histogram_t end_to_end;
} fh_handled_t;

void fh_handled_init (fh_handled_t *self);

/* Takes the content of frames[0..count-1] (they are left empty, still to
   be closed by the caller) into a new message with holders = 0. NULL when
   out of memory. */
fh_msg_t *fh_msg_new (zmq_msg_t *frames, uint32_t count, uint64_t seq, int64_t received_ns);
/* The one thread that makes bus messages (the enqueuer) receives their
   frames straight into the message: it takes an empty message, a shell,
   with room for `room` frames (frames[0..room-1] not initialised: each is
   zmq_msg_init'ed as it is received), and, once its frames are read and
   the message is to be handed out, fills in the rest (fh_msg_fill). The
   memory comes from messages released before, by any thread, rather than
   from malloc; a malloc and a cross-thread free per message cost more than
   the rest of the hand-off, and receiving into the message saves moving
   each frame out of a scratch array (an init, a move and a close a frame).
   NULL when out of memory. */
fh_msg_t *fh_msg_shell (uint32_t room);
/* A shell not made into a message (its frames closed, or never opened):
   kept for the calling thread's next fh_msg_shell. */
void fh_msg_shell_put (fh_msg_t *shell);
/* shell, whose frames[0..count-1] hold a message read (bytes: their sizes
   added up, which the enqueuer's read has counted already), as a new
   message with holders = 0. */
static inline fh_msg_t *
fh_msg_fill (fh_msg_t *shell, uint32_t count, uint64_t bytes, uint64_t seq, int64_t received_ns)
{
    atomic_init (&shell->holders, 0);
    shell->frame_count = count;
    shell->seq = seq;
    shell->received_ns = received_ns;
    shell->emit = NULL;
    shell->from_spool = false;
    shell->spool_mark = 0;
    shell->deferral = NULL;
    shell->bytes = bytes;
    return shell;
}
/* Frees what the cache holds: the calling thread's share, and what was
   released to it. Once no message is alive (at the end of a hub). */
void fh_msg_cache_drain (void);
/* Frees it now, whatever the holder count (for a message never handed out). */
void fh_msg_destroy (fh_msg_t **self_p);
/* Drops one holder; the last one records the message as handled in
   `handled` (may be NULL), tells its emit waiter, and frees it. */
void fh_msg_release (fh_msg_t *self, fh_handled_t *handled);
/* The enqueuer, spilling msg: one more copy owes its completion (made
   on first use; it shares the emit waiter, which it tells). 0, or -1 out
   of memory. */
int fh_msg_defer (fh_msg_t *self);
/* Drops one reference of a deferral; the last one records the message as
   handled in `handled` (may be NULL) and tells its emit waiter. */
void fh_deferral_release (fh_deferral_t *self, fh_handled_t *handled, int64_t now_ns);
/* The same, when the caller has just read the clock (now_ns). */
void fh_msg_release_at (fh_msg_t *self, fh_handled_t *handled, int64_t now_ns);

static inline fanhub_bytes_t
fh_msg_frame (const fh_msg_t *self, size_t i)
{
    if (i >= self->frame_count)
        return (fanhub_bytes_t){NULL, 0};
    /* zmq_msg_data/size take a non-const pointer but do not modify. */
    zmq_msg_t *frame = (zmq_msg_t *) &self->frames[i];
    return (fanhub_bytes_t){zmq_msg_data (frame), zmq_msg_size (frame)};
}

#endif
