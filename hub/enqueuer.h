/*  enqueuer - the thread that owns the bus: receives, checks, stamps, routes.

    A CZMQ actor with one SUB socket, connected and/or bound to every
    endpoint of bus.connect / bus.bind and subscribed to the prefixes the
    trigger table needs. For each message it reads (in batches, until the
    socket has no more), it checks the frames (a body, at most
    bus.max_frames, at most bus.max_message_bytes, a UTF-8 topic), stamps a
    sequence number and the monotonic receive time, looks up the matching
    consumers and offers the one shared message to each. A full queue is
    handled by that consumer's queue.overflow (a drop or a spill, counted
    there); only `block` makes the enqueuer wait, and then every consumer
    waits with it, while the control plane keeps answering.

    Counters (received, malformed by reason, unrouted) have one writer, the
    enqueuer, and are read by anyone.
*/
#ifndef FH_ENQUEUER_H_INCLUDED
#define FH_ENQUEUER_H_INCLUDED

#include "config.h"
#include "consumer.h"
#include "emit.h"
#include "endpoint_watch.h"
#include "fedmsg_sign.h"
#include "trigger.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct fh_enqueuer fh_enqueuer_t;

typedef enum {
    FH_MALFORMED_NO_BODY,         /* fewer than two frames */
    FH_MALFORMED_TOO_MANY_FRAMES, /* more than bus.max_frames */
    FH_MALFORMED_TOO_LARGE,       /* more than bus.max_message_bytes */
    FH_MALFORMED_TOPIC_NOT_UTF8,
    FH_MALFORMED_REASONS
} fh_malformed_reason_t;

typedef struct {
    uint64_t received;  /* bus messages read, malformed ones included */
    uint64_t malformed; /* sum of by_reason */
    uint64_t malformed_by_reason[FH_MALFORMED_REASONS];
    uint64_t unrouted;           /* well-formed, but matched no consumer */
    uint64_t auth_denied;        /* bus handshakes refused: key, address, mechanism */
    uint64_t peers_refused;      /* bus connections shed: max_peers, no fd */
    bool signatures;             /* bus.validate_signatures is on: the two below count */
    uint64_t signatures_checked; /* messages checked */
    uint64_t signature_failed[FH_SIG_REASONS]; /* and failed, by reason */
    int64_t crl_next_update;     /* its CRL's nextUpdate, s since the epoch; 0: none */
    uint64_t control_refused;    /* control connections shed (fdlimit.h; the hub's) */
    uint64_t control_unanswered; /* control answers that could not be sent (the hub's) */
    bool gap_detection;          /* bus.gap_detection is on: the four below count */
    uint64_t upstream_lost, upstream_restarts, upstream_untracked, upstream_producers;
} fh_enqueuer_counts_t;

/* Where the control actor sends injected messages (emit, dead-letter
   replay), and bus.amqp its deliveries (source_amqp.h): a PUSH socket connected here delivers multipart messages
   [fh_inject_t as bytes, topic, body, more frames...]. */
typedef struct {
    fh_emit_t *emit; /* the waiter the enqueuer reports to (never NULL) */
    bool only;       /* to the consumer fh_emit_target names, only */
    bool source;     /* from an input of its own (bus.amqp): counted as
                          received, not published on bus.publish */
} fh_inject_t;
const char *fh_enqueuer_inject_endpoint (fh_enqueuer_t *self);

/* A short name of a malformed reason, e.g. "no_body". */
const char *fh_malformed_reason_name (fh_malformed_reason_t reason);

/* Starts the actor: socket up, subscribed, connected and bound. On error
   (an endpoint cannot be bound, say) returns NULL with one line in err.
   The consumers must outlive the enqueuer. */
fh_enqueuer_t *fh_enqueuer_new (const fh_config_t *config, fh_trigger_t *trigger,
                                fh_consumer_t **consumers, size_t consumer_count, char *err,
                                size_t errlen);
/* Stops receiving and closes the socket; the counters stay readable.
   Safe twice. */
void fh_enqueuer_stop (fh_enqueuer_t *self);
/* Stops it if running, and frees it. Safe with NULL and twice. */
void fh_enqueuer_destroy (fh_enqueuer_t **self_p);
void fh_enqueuer_counts (fh_enqueuer_t *self, fh_enqueuer_counts_t *out);
/* A reload's bus.validate_signatures, loaded anew from config (the CA and
   CRL files are read again): in force from the next bus message on, or
   off when config has none. 0, or -1 with why in err (nothing changes). */
int fh_enqueuer_reload_signatures (fh_enqueuer_t *self, const fh_config_t *config, char *err,
                                   size_t errlen);
/* A reload: routes by trigger and consumers from the next message on
   (the caller keeps both alive, and frees the old ones after). Waits until
   the enqueuer has switched. fold_from (NULL, or one per consumer, NULL
   where none): an instance that never started, whose messages move to
   consumers[i] at the switch (fh_consumer_fold_into); folded[i] says
   whether they did. */
int fh_enqueuer_swap (fh_enqueuer_t *self, fh_trigger_t *trigger, fh_consumer_t **consumers,
                      size_t consumer_count, fh_consumer_t **fold_from, bool *folded, char *err,
                      size_t errlen);
/* Messages handled by the enqueuer itself (every consumer's queue was
   full), and their latency. */
uint64_t fh_enqueuer_handled (fh_enqueuer_t *self, fh_histogram_snapshot_t *end_to_end);
/* Connections up on endpoint i: bus.connect endpoints first, then
   bus.bind, in config order. From the ZeroMQ socket monitor, so it lags
   the network by a moment. */
int fh_enqueuer_endpoint_peers (fh_enqueuer_t *self, size_t i);
/* When the actor's loop last turned (monotonic ns): at least once a
   second while it runs, idle or not, but not while a `block` consumer's
   full queue holds it. Once the actor has ended (the hub is stopping):
   now, as there is nothing left to watch. */
int64_t fh_enqueuer_beat_ns (fh_enqueuer_t *self);
/* Endpoint i's state (endpoint_watch.h): connected or not, since when,
   its last error; same numbering. */
void fh_enqueuer_endpoint_status (fh_enqueuer_t *self, size_t i, fh_endpoint_status_t *out);

#endif
