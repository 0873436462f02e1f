/*  source_amqp - bus.amqp: messages from RabbitMQ queues, acked when done.

    Beside (or instead of) the ZeroMQ SUB socket, the hub can consume from
    RabbitMQ (AMQP 0-9-1, librabbitmq). A CZMQ actor owns one connection
    and one channel per queue: `queue`, or with `shards: N` the N shard
    queues `queue.0` ... `queue.N-1` that a consistent-hash exchange
    feeds, each with a single active consumer (docs/scaling.md). Each
    delivery becomes a bus message (topic = the routing key, body = the
    message body) handed to the enqueuer through its injection socket,
    so routing, shards, metrics and every consumer feature work as for
    ZeroMQ input; the enqueuer checks it as it checks bus messages.

    Acknowledgement. Each delivery carries an emit waiter (emit.h), the
    countdown that `fanhub emit --wait` uses: when every consumer it was
    routed to is done with it (docs/acknowledgements.md; a spilled message
    when its copy read back from the spool is done), the waiter tells this
    actor, which answers the broker by delivery tag on its own thread:
      - ack: it was routed and at least one consumer took it (completed,
        failed into dead letters, coalesced), or it matched no consumer
        (unrouted, as a ZeroMQ message would be);
      - reject without requeue: malformed (no body, too large, topic not
        UTF-8); the broker dead-letters it to the queue's
        x-dead-letter-exchange (`dead_letter_exchange:`), or drops it when
        the queue has none;
      - nack with requeue: every consumer it went to refused it (a full
        drop-newest/drop-oldest queue): the broker delivers it again.
    basic.qos `prefetch` per channel bounds the deliveries open at once.
    When the connection is lost or the hub stops, the open deliveries are
    not acked: the broker delivers them again (to this hub after a
    reconnect, or to another one), so a consumer may see a message twice,
    at most `prefetch` per queue per loss. The actor reconnects with a
    doubling backoff from 100 ms to `reconnect_max`.

    Counters have one writer, the actor, and are read by anyone.
*/
#ifndef FH_SOURCE_AMQP_H_INCLUDED
#define FH_SOURCE_AMQP_H_INCLUDED

#include "fanhub/consumer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* bus.amqp, read and checked. */
typedef struct fh_amqp_settings fh_amqp_settings_t;

/* Reads bus.amqp from its option tree (a map), reading password_file or
   password_env. On error returns NULL, with err = "bus.amqp.KEY: message
   (FILE:LINE:COL)" (the wording a plugin's options get). */
fh_amqp_settings_t *fh_amqp_settings_new (const fanhub_option_t *tree, char *err, size_t errlen);
/* Safe with NULL and twice. */
void fh_amqp_settings_destroy (fh_amqp_settings_t **self_p);

typedef struct fh_source_amqp fh_source_amqp_t;

/* How many consumers the hub has now (an emit waiter's size). */
typedef size_t (fh_source_count_fn) (void *arg);
/* Whether the consumer of that name is halted now (FANHUB_STATE_HALTED). */
typedef bool (fh_source_halted_fn) (void *arg, const char *consumer);

typedef struct {
    uint64_t delivered;  /* deliveries received */
    uint64_t acked;      /* acked: done */
    uint64_t rejected;   /* rejected without requeue: malformed */
    uint64_t requeued;   /* nacked with requeue: every consumer refused */
    uint64_t reconnects; /* connections made after the first */
    uint64_t unacked;    /* deliveries open now */
    bool connected;      /* consuming now */
} fh_source_amqp_counts_t;

/* Starts the actor, which connects in the background (a broker that is
   down is retried, not an error). Injected messages go to the enqueuer's
   endpoint. NULL with one line in err when bus.amqp does not read or the
   actor cannot start. */
fh_source_amqp_t *fh_source_amqp_new (const fanhub_option_t *tree, const char *inject_endpoint,
                                      fh_source_count_fn *count, void *count_arg, char *err,
                                      size_t errlen);
/* The source of one fedora_messaging consumer (source_amqp_fm.c): its
   config.toml normalised (config_fedora.c), each delivery targeted at
   that consumer alone and answered as fedora-messaging answers it: ack
   when the consumer completed it (OK; a Drop, a message it could not
   read: skipped), nack with requeue otherwise (retries used up after
   Nack, a failure, dropped at a full queue or a stop); reject without
   requeue when malformed. While the consumer is halted the connection
   is closed (the broker requeues what it held) and opens again when it
   is not. count and halted are called with arg. */
fh_source_amqp_t *fh_source_amqp_new_fedora (const struct json_t *fm, const char *consumer,
                                             const char *inject_endpoint, fh_source_count_fn *count,
                                             fh_source_halted_fn *halted, void *arg, char *err,
                                             size_t errlen);
/* Stops consuming and closes the connection: what is not acked yet is
   delivered again by the broker. Safe twice. */
void fh_source_amqp_stop (fh_source_amqp_t *self);
/* Stops it, and frees it: only once no message it injected is alive
   (their waiters still tell it). Safe with NULL and twice. */
void fh_source_amqp_destroy (fh_source_amqp_t **self_p);
void fh_source_amqp_counts (fh_source_amqp_t *self, fh_source_amqp_counts_t *out);

#endif
