/*  pending - the messages of one consumer that its plugin answered
    FANHUB_PENDING and has not completed yet (ABI 1.1, host->complete).

    An entry is reserved only when the plugin asks for a message's ticket
    during its consume call (host->msg_ticket, which the consumer's
    attempt answers: consumer_attempt.c), so a plugin that answers at once
    never comes here. When consume answers PENDING the entry stays open;
    otherwise the worker cancels it. host->complete, from any
    thread, moves an open (or still reserved) entry to the done list and
    calls the wake function, and a worker of the consumer takes it from
    there (fh_pending_take_done) and finishes the message as if consume
    had answered the result: the retry, dead-letter and counting rules stay
    in one place, on the consumer's threads.

    At most `capacity` entries (the consumer's max_pending) exist at once;
    a worker does not call consume while fh_pending_full. A ticket is
    never 0 and is not reused within a run, so a late or doubled complete
    is recognised and ignored.

    In a pool, several workers may be inside consume at once: each claims
    a place in the window before its call (fh_pending_claim, under the
    pool's lock), which its reservation takes over or it gives back, so a
    reservation always finds room and the window is never passed.

    Threads: every function may be called from any thread; one mutex,
    held briefly, never while calling the plugin or the wake function.
    The counts (fh_pending_count, fh_pending_full, fh_pending_done_count)
    are read without it: a worker asks them once a message.
*/
#ifndef FH_PENDING_H_INCLUDED
#define FH_PENDING_H_INCLUDED

#include "fanhub/consumer.h"
#include "message.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fh_pending fh_pending_t;

/* Told that an entry is done (called without the module's lock). */
typedef void (fh_pending_wake_fn) (void *arg);

/* What a worker keeps about one message between consume calls. */
typedef struct {
    fh_msg_t *msg;
    void *slot;             /* the pool's scheduler slot, or NULL */
    uint32_t attempts;      /* consume calls so far, this one included */
    int64_t first_ns;       /* start of the first attempt */
    int64_t started_ns;     /* start of the attempt now open */
    fanhub_result_t result; /* set by complete */
    char *reason;           /* set by complete with a reason (ABI 1.3): malloc'd,
                            the taker of the item frees it */
    bool expired;           /* by fh_pending_expire, not by the plugin */
} fh_pending_item_t;

/* capacity >= 1. NULL when out of memory. */
fh_pending_t *fh_pending_new (size_t capacity, fh_pending_wake_fn *wake, void *wake_arg);
/* Frees the table; the messages of entries still open are handed to
   release (may be NULL) first. Safe with NULL and twice. */
void fh_pending_destroy (fh_pending_t **self_p, void (*release) (fh_msg_t *msg, void *arg),
                         void *arg);

/* Reserves an entry for one consume call of item->msg, taking over a
   place claimed for it when `claimed`. Answers the ticket, or 0 when the
   table is full (then a claim is still the caller's). */
fanhub_ticket_t fh_pending_reserve (fh_pending_t *self, const fh_pending_item_t *item,
                                    bool claimed);
/* A place in the window for a consume call about to start; counted by
   fh_pending_full until a reservation takes it over or it is given back
   (fh_pending_unclaim). */
void fh_pending_claim (fh_pending_t *self);
void fh_pending_unclaim (fh_pending_t *self);
/* After consume answered PENDING: the entry stays open. */
void fh_pending_hold (fh_pending_t *self, fanhub_ticket_t ticket);
/* After consume answered anything else: frees the entry. True when the
   plugin had also completed it (a plugin error the caller may log). */
bool fh_pending_cancel (fh_pending_t *self, fanhub_ticket_t ticket);

/* host->complete: 0, or -1 when the ticket is not open (unknown, already
   completed, or its consumer is another). */
int fh_pending_complete (fh_pending_t *self, fanhub_ticket_t ticket, fanhub_result_t result);
/* The same with the plugin's reason for a RETRY or FAIL (NULL or "" for
   none; copied, one line, cut at 255 bytes). -1 also when out of memory. */
int fh_pending_complete_reason (fh_pending_t *self, fanhub_ticket_t ticket, fanhub_result_t result,
                                const char *reason);

/* Takes the oldest completed entry into *out and frees it: true; false
   when none is done. */
bool fh_pending_take_done (fh_pending_t *self, fh_pending_item_t *out);
/* Entries in use (reserved, open or done but not yet taken). */
size_t fh_pending_count (fh_pending_t *self);
/* True when as many entries are in use, or claimed, as the window allows. */
bool fh_pending_full (fh_pending_t *self);
/* The plugin's window (host->set_window, ABI 1.5): at most window entries
   in use before fh_pending_full; 0, or more than the capacity, is the
   capacity. A window (not 0) also means the plugin starts each entry's
   clock with fh_pending_started: until then an entry is never overdue. */
void fh_pending_set_window (fh_pending_t *self, size_t window);
size_t fh_pending_window (fh_pending_t *self);
/* host->ticket_started (ABI 1.5): the open (or reserved) entry's expiry
   clock starts again at now_ns; an unknown ticket is ignored. */
void fh_pending_started (fh_pending_t *self, fanhub_ticket_t ticket, int64_t now_ns);
/* Completed entries not yet taken. */
size_t fh_pending_done_count (fh_pending_t *self);
/* Waits until an entry is done or the clock (CLOCK_MONOTONIC) reaches
   deadline_ns; true when one is done. */
bool fh_pending_wait (fh_pending_t *self, int64_t deadline_ns);
/* Open entries whose clock (the attempt's start, or fh_pending_started)
   is before before_ns (stuck), and the
   ticket's message sequence number of the oldest in *oldest_seq. */
size_t fh_pending_older_than (fh_pending_t *self, int64_t before_ns, uint64_t *oldest_seq);
/* Ends the open entries whose clock is before before_ns as if the
   plugin had completed them with FANHUB_RETRY (item.expired set): their
   tickets are void from now on, so a late complete is refused. Answers
   how many, the oldest one's message in *oldest_seq; wakes when any. */
size_t fh_pending_expire (fh_pending_t *self, int64_t before_ns, uint64_t *oldest_seq);
/* Takes one open entry (not reserved, not done) into *out and frees it,
   its ticket void: true; false when none is open. */
bool fh_pending_take_open (fh_pending_t *self, fh_pending_item_t *out);

#endif
