/*  emit - waiting for one message to be handled (fanhub emit --wait).

    A message injected with `emit --wait` carries an fh_emit_t. Each
    consumer it was handed to writes its outcome, under its name, before
    releasing the message. Outcomes are keyed by the consumer's name (its
    lineage), not by its place in the configuration: a reload between the
    EMIT and its answer moves consumers about, and an outcome must not be
    told of another consumer; the release that hands the message over to
    "handled" (message.c) marks the waiter handled. The waiter is shared
    by the message and whoever waits (the control actor), each holding a
    reference; the last to let go frees it.
*/
#ifndef FH_EMIT_H_INCLUDED
#define FH_EMIT_H_INCLUDED

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum {
    FH_OUTCOME_NONE = 0,  /* not handed to this consumer (topic not matched) */
    FH_OUTCOME_PENDING,   /* handed over, not finished */
    FH_OUTCOME_COMPLETED, /* consume answered OK */
    FH_OUTCOME_FAILED,    /* failed, retries used up, or dead-lettered */
    FH_OUTCOME_DROPPED,   /* never consumed: queue full, or shutdown */
    FH_OUTCOME_COALESCED, /* replaced by a newer message of its key */
    FH_OUTCOME_SPILLED    /* written to the consumer's disk spool */
} fh_outcome_t;

typedef struct fh_emit fh_emit_t;

/* Told (on whichever thread hands the message over to handled) that a
   waiter is handled; must be quick and must not block. */
typedef void (fh_emit_notify_fn) (void *arg);

/* A waiter with two references: the caller's and the message's.
   consumer_count is a hint of how many outcomes to make room for. */
fh_emit_t *fh_emit_new (size_t consumer_count);
/* The enqueuer, on receiving a waiter from another thread: makes what
   fh_emit_new wrote visible. */
void fh_emit_acquire (fh_emit_t *self);
/* Before the hand-over to the enqueuer: notify(arg) is called when the
   waiter becomes handled (bus.amqp acks then; source_amqp.h). */
void fh_emit_set_notify (fh_emit_t *self, fh_emit_notify_fn *notify, void *arg);
/* Before the hand-over to the enqueuer: the message goes to the consumer
   of this name only, whatever its topics (a replay to one consumer). By
   name, not by place: a reload may move consumers about before the
   enqueuer routes it. -1 when out of memory. */
int fh_emit_set_target (fh_emit_t *self, const char *consumer);
/* That name, or NULL. */
const char *fh_emit_target (fh_emit_t *self);
/* Drops the caller's reference. Safe with NULL. */
void fh_emit_unref (fh_emit_t **self_p);

/* Any thread: the outcome for the consumer of that name (copied). */
void fh_emit_set_outcome (fh_emit_t *self, const char *consumer, fh_outcome_t outcome);
/* FH_OUTCOME_NONE when that consumer wrote none. */
fh_outcome_t fh_emit_outcome (fh_emit_t *self, const char *consumer);
/* Calls fn for each consumer that wrote an outcome, in the order they
   first did. */
void fh_emit_each_outcome (fh_emit_t *self,
                           void (*fn) (const char *consumer, fh_outcome_t outcome, void *arg),
                           void *arg);
/* From the enqueuer, once it has offered the message: how many consumers
   it matched (their outcomes are PENDING or DROPPED now), or -1 when the
   message was malformed. After this, fh_emit_matched answers. */
void fh_emit_routed (fh_emit_t *self, int matched);
/* -2 until routed; then the matched count, or -1 for malformed. */
int fh_emit_matched (fh_emit_t *self);
/* From the message's last release: marks it handled, drops its reference. */
void fh_emit_handled (fh_emit_t *self);
/* For the message never made (out of memory, no consumer matched). */
void fh_emit_abandon (fh_emit_t *self);
bool fh_emit_is_handled (fh_emit_t *self);
const char *fh_outcome_name (fh_outcome_t outcome);

#endif
