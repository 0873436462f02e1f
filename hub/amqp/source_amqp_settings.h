/*  source_amqp_settings - bus.amqp as source_amqp.c uses it (private to
    source_amqp*.c; the reader is fh_amqp_settings_new, source_amqp.h).

    Every key is documented in config/fanhub.yaml (bus.amqp) and
    docs/scaling.md.
*/
#ifndef FH_SOURCE_AMQP_SETTINGS_H_INCLUDED
#define FH_SOURCE_AMQP_SETTINGS_H_INCLUDED

#include "pyjson.h"
#include "source_amqp.h"

#include <amqp.h>

struct fh_amqp_settings {
    char *host;
    int port;
    bool tls;        /* amqps:// */
    char *vhost;     /* vhost:, else the url's, else "/" */
    char *user;      /* user:, else the url's, else guest */
    char *url_user;  /* the url's user, or NULL */
    char *password;  /* from password_file / password_env; "guest" for guest */
    char *queue;     /* the queue, or the shard queues' prefix */
    size_t shards;   /* 0: one queue; N: queue.0 ... queue.N-1 */
    size_t prefetch; /* basic.qos per channel */
    int heartbeat_s; /* 0: none */
    bool declare;    /* declare the topology at each connect */
    char *exchange;  /* where messages come from ("" = none) */
    char **bindings; /* binding keys from exchange */
    size_t binding_count;
    char *hash_exchange;        /* with shards: the x-consistent-hash exchange */
    char *hash_header;          /* hash this header, not the routing key; or NULL */
    char *queue_type;           /* "classic" or "quorum" */
    char *dead_letter_exchange; /* x-dead-letter-exchange, or NULL */
    int64_t reconnect_max_ms;
    size_t prefer_index, prefer_count;    /* prefer: shards s with s % count == index
                                          first; count 0 = every shard at once */
    int64_t standby_delay_ms;             /* then the others, as a standby, this much later */
    char *ca_file, *cert_file, *key_file; /* tls: */
    bool verify_peer, verify_hostname;
    bool fedora_envelope; /* envelope: fedora-messaging */
    bool loop_guard;      /* loop_guard: mark deliveries with a third frame */
    /* A fedora_messaging consumer's source (source_amqp_fm.c): its
       config.toml as normalised (a reference), and the one consumer its
       deliveries go to; NULL for bus.amqp. */
    struct json_t *fedora;
    char *target;
};

/* The marker frame (frame 3) of a message bus.amqp received, with
   loop_guard: the amqp plugin does not publish such a message again. */
#define FH_AMQP_MARK "fanhub.amqp"

/* envelope: fedora-messaging: the delivery as a fedmsg envelope, encoded
   as fedmsg did, appended to out: {topic: the routing key, msg: the body,
   msg_id: the message_id (when it has one), timestamp: the sent-at
   header (else the timestamp property, else now), headers: the AMQP
   headers JSON can hold}. -1 when the body is not JSON (or out of memory):
   it goes as it came. source_amqp_envelope.c. */
int fh_amqp_fedora_envelope (const amqp_envelope_t *envelope, fh_buf_t *out);

/* A fedora_messaging consumer's third frame: the delivery's properties
   as JSON ({message_id, content_type, content_encoding, delivery_mode,
   priority, headers, queue}: those it has), appended to out; -1 when out
   of memory. source_amqp_envelope.c. */
int fh_amqp_fedora_properties (const amqp_envelope_t *envelope, const char *queue, fh_buf_t *out);
/* The queue a delivery came from, by its consumer tag; or NULL. */
const char *fh_amqp_fedora_queue (const fh_amqp_settings_t *settings,
                                  const amqp_envelope_t *envelope);

/* source_amqp_fm.c: a fedora_messaging consumer's settings from its
   normalised config.toml (NULL with "FILE: why" in err); its login (with
   [client_properties]), its exchanges, queues and bindings on channel 1
   (passively with passive_declares), and one basic.consume per queue on
   channel 1. The last two: 0, or -1 with why. */
fh_amqp_settings_t *fh_amqp_settings_from_fedora (const struct json_t *fm, const char *consumer,
                                                  char *err, size_t errlen);
amqp_rpc_reply_t fh_amqp_fedora_login (amqp_connection_state_t conn,
                                       const fh_amqp_settings_t *settings);
int fh_amqp_fedora_declare (amqp_connection_state_t conn, const fh_amqp_settings_t *settings,
                            char *why, size_t len);
int fh_amqp_fedora_consume (amqp_connection_state_t conn, const fh_amqp_settings_t *settings,
                            char *why, size_t len);

#endif
