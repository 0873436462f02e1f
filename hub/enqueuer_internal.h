/*  enqueuer_internal - what the files of the enqueuer share.

    The enqueuer (see enqueuer.h) is split by job:
      enqueuer.c        the actor and its loop: reading, checking, numbering
                        and handing out messages, injections, the public API
      enqueuer_peers.c  the bus endpoints: the sockets, their security and
                        ZAP policies, monitor events, peer counting and
                        bus.max_peers
      enqueuer_swap.c   SWAP: applying a reload's routing table, between
                        two messages or in the middle of a blocked one
    Only these files include this header; the rest of the hub uses
    enqueuer.h.
*/
#ifndef FH_ENQUEUER_INTERNAL_H_INCLUDED
#define FH_ENQUEUER_INTERNAL_H_INCLUDED

#include "enqueuer.h"

#include "atomics.h"
#include "endpoint_watch.h"
#include "fedmsg_sign.h"
#include "gaps.h"
#include "log.h"
#include "zap.h"

#include <czmq.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>

struct fh_enqueuer {
    /* Written by the actor only. */
    alignas (FH_CACHE_LINE) atomic_uint_fast64_t received;
    atomic_uint_fast64_t malformed_by_reason[FH_MALFORMED_REASONS];
    atomic_uint_fast64_t unrouted;
    atomic_int *peers;                  /* per endpoint: connect first, then bind */
    atomic_int bind_peers;              /* the bind endpoints' together */
    atomic_uint_fast64_t auth_denied;   /* handshakes refused: key, address,
                                           mechanism, cryptography */
    atomic_uint_fast64_t peers_refused; /* shed: past max_peers, or no fd */
    fh_endpoint_watch_t *watch;         /* the endpoints' state; read by anyone */
    atomic_int_fast64_t beat_ns;        /* the loop's last turn (monotonic) */
    fh_handled_t handled;               /* messages every matching consumer refused */
    fh_gaps_t *gaps;                    /* bus.gap_detection, or NULL */

    /* bus.validate_signatures: messages checked, and failed by reason. */
    atomic_uint_fast64_t sig_checked;
    atomic_uint_fast64_t sig_failed[FH_SIG_REASONS];

    char inject_endpoint[64];
    void *publish; /* PUB on bus.publish, for emitted messages; or NULL */
    zsock_t *pipe; /* the actor's pipe, watched while blocked */
    void *pipe_handle;
    void *sub_handle; /* the SUB socket, for a swap while blocked */
    bool terminating; /* $TERM seen while blocked */

    alignas (FH_CACHE_LINE) const fh_config_t *config;
    fh_trigger_t *trigger;
    fh_consumer_t **consumers;
    size_t consumer_count;
    zactor_t *actor;
    char start_error[512];  /* set by the actor when setup failed */
    atomic_bool setup_done; /* release: start_error is final */
    atomic_bool finished;   /* release: the actor is done with self */

    /* Actor-private. */
    int max_peers;               /* per bind endpoint, resolved */
    int *bind_ports;             /* per bind endpoint: its tcp port once bound, or -1 */
    fh_zap_policy_t policies[2]; /* the ZAP domains: bus, publish */
    /* A message is received into a shell (message.h), the next one's
       taken as the last is handed out; into frames when none could be
       had (out of memory: the message is then dropped, and counted). */
    fh_msg_t *shell;
    uint32_t shell_room; /* the frames the next shell has room for */
    zmq_msg_t *frames;   /* room for max_frames */
    uint32_t *matches;   /* room for consumer_count */
    /* The consumers offered something since the last signal: only they may
       sleep with messages not yet signalled. */
    uint32_t *offered; /* room for consumer_count */
    size_t offered_count;
    bool *offered_mark;      /* by consumer index */
    int64_t wake_held_since; /* the loop holds the wake-ups back since; 0: not */
    /* The message being handed out: the consumers it still goes to (a
       swap while blocked re-aims them; NULL: no longer one to offer to). */
    fh_consumer_t **targets;          /* room for consumer_count */
    size_t target_next, target_count; /* [next, count) not yet offered */
    fh_msg_t *target_msg;
    int64_t blocked_since_ns; /* an offer waits for room since; 0: none */
    bool blocked_said;        /* ... and the log said so */
    uint64_t seq;
    fh_ratelimit_t malformed_log;
    fh_ratelimit_t refused_log; /* peers a bind endpoint's handshake refused */
    int64_t watch_due_ns;       /* the watch's next due time; 0: to be asked */

    /* bus.validate_signatures, or NULL; its on_failure: deliver; one log
       limiter a reason. A reload leaves its successor in sig_next (an
       fh_enq_sig_next_t the actor takes between messages); sig_on says
       to other threads whether one is in force. */
    fh_sig_verifier_t *verifier;
    bool sig_deliver;
    fh_ratelimit_t sig_log[FH_SIG_REASONS];
    _Atomic (void *) sig_next;
    atomic_bool sig_on;
    /* Its CRL's nextUpdate (0: none), for the stats; whether the CRL's
       expiry was told (once per CRL). */
    atomic_int_fast64_t sig_crl_next;
    bool sig_crl_warned;
};

/* The bus sockets the actor owns (fh_enq_open_bus). */
typedef struct {
    zsock_t *sub;     /* bus.bind and bus.connect */
    zsock_t *monitor; /* the SUB socket's events, or NULL */
    zsock_t *publish; /* bus.publish, or NULL */
    fh_zap_t *zap;    /* guards bus.bind and bus.publish, or NULL */
} fh_enq_bus_t;

/* A reload's new routing (enqueuer_swap.c). */
typedef struct fh_enq_swap fh_enq_swap_t;

/* The end of a run of offers: wakes the consumers that sleep with
   messages offered since (the queues do not wake them at every push).
   Only the consumers offered something are looked at: with 1,000
   consumers and 3 matching, a run costs 3 looks, not 1,000. Here, not in
   enqueuer.c, so that the enqueuer's files call one way (test_layout). */
static inline void
fh_enq_signal_all (fh_enqueuer_t *self)
{
    for (size_t i = 0; i < self->offered_count; i++) {
        uint32_t index = self->offered[i];
        self->offered_mark[index] = false;
        fh_consumer_signal (self->consumers[index]);
    }
    self->offered_count = 0;
}

/* The first frame of a message if one is waiting (frame is then the
   caller's to close); false, with nothing to close, when none is. */
static inline bool
fh_enq_recv_now (void *socket, zmq_msg_t *frame)
{
    zmq_msg_init (frame);
    if (zmq_msg_recv (frame, socket, ZMQ_DONTWAIT) >= 0)
        return true;
    zmq_msg_close (frame);
    return false;
}

/* enqueuer_peers.c: makes the bus sockets. -1 when the SUB socket cannot
   be made; else 0, with start_error set when an endpoint failed. */
int fh_enq_open_bus (fh_enqueuer_t *self, fh_enq_bus_t *bus);
/* enqueuer_peers.c: closes them; the endpoints have no peers after. */
void fh_enq_close_bus (fh_enqueuer_t *self, fh_enq_bus_t *bus);
/* enqueuer_peers.c: handles one monitor event; false when none was waiting. */
bool fh_enq_monitor_event (fh_enqueuer_t *self, void *monitor);
/* enqueuer_peers.c: the endpoint warnings and reconnections due by now;
   returns the poll timeout until the next one (-1: none). */
long fh_enq_watch_tick (fh_enqueuer_t *self, int64_t now);

/* enqueuer_signatures.c: loads bus.validate_signatures (nothing when
   off); -1 with why in err. Close is safe twice. */
int fh_enq_signatures_open (fh_enqueuer_t *self, char *err, size_t errlen);
void fh_enq_signatures_close (fh_enqueuer_t *self);
/* enqueuer_signatures.c: checks a well-formed bus message (topic, body)
   with the verifier; counts and logs a failure. True when it is to be
   dropped. */
bool fh_enq_signature_refused (fh_enqueuer_t *self, zmq_msg_t *frames);
/* enqueuer_signatures.c: takes a reload's verifier, if one came. */
void fh_enq_signatures_take (fh_enqueuer_t *self);
/* enqueuer_signatures.c: at each turn of the loop (at least once a
   second): takes a reload's verifier, and warns once when the CRL has
   passed its nextUpdate. */
void fh_enq_signatures_tick (fh_enqueuer_t *self);

/* enqueuer_swap.c: applies a swap between two messages (or while one is
   blocked), the SUB socket's subscriptions following. 0, or -1 when out
   of memory. */
int fh_enq_apply_swap (fh_enqueuer_t *self, fh_enq_swap_t *swap, void *sub);

#endif
