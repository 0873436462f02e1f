/*  bridge.h - the amqp plugin's modules, seen from each other.

    options.c reads and checks the consumer's options (init and check);
    connect.c makes a connection to the broker, ready to publish;
    link.c owns the connection on a thread of its own, publishes and
    settles the confirms;
    amqp.c is the plugin: its descriptor, consume, init and fini. The
    plugin's design is in amqp.c's opening comment and docs/plugins/amqp.md.
*/
#ifndef FANHUB_AMQP_BRIDGE_H_INCLUDED
#define FANHUB_AMQP_BRIDGE_H_INCLUDED

#include <fanhub/consumer.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The channel every publish goes on (connect.c opens it). */
#define BRIDGE_CHANNEL 1
/* AMQP 0-9-1 short strings (exchange, routing key) hold at most 255 bytes. */
#define BRIDGE_SHORTSTR_MAX 255
/* Frame 3 of a message the hub's bus.amqp received (its loop_guard,
   hub/amqp/source_amqp_settings.h FH_AMQP_MARK): not published again. */
#define BRIDGE_AMQP_MARK "fanhub.amqp"

/* A topic prefix and what it maps to (schemas:, severities:). */
typedef struct {
    char *prefix;
    char *name;   /* schemas */
    int severity; /* severities */
} bridge_rule_t;

/* envelope: fedora-messaging (fedora.c). */
typedef struct {
    bool on;
    bool body_msg;          /* body: msg (the fedmsg "msg"), else whole */
    char *schema;           /* the default fedora_messaging_schema */
    int severity;           /* the default fedora_messaging_severity */
    bridge_rule_t *schemas; /* the first prefix that matches wins */
    size_t schema_count;
    bridge_rule_t *severities;
    size_t severity_count;
} bridge_fedora_t;

/* declare: true (declare.c): the workers' topology, declared at each
   connect as bus.amqp's declare does, so that nothing published before
   the workers start is unroutable. */
typedef struct {
    bool on;
    char *queue;   /* the queue, or the shard queues' prefix */
    size_t shards; /* 0: one queue */
    char **bindings;
    size_t binding_count;
    char *hash_exchange;        /* default QUEUE.hash */
    char *hash_header;          /* or NULL */
    char *queue_type;           /* classic or quorum */
    char *dead_letter_exchange; /* or NULL */
} bridge_declare_t;

/* The options, as init and check read them. Strings are the plugin's own
   copies (bridge_options_free releases them); password is NULL in check. */
typedef struct {
    char *host;
    int port;
    char *vhost;
    char *user;
    char *password; /* password_file or password_env; "guest" when neither */
    bool password_given;
    bool tls;
    char *ca_file;   /* NULL: the system's trust store is not loaded */
    char *cert_file; /* with key_file: a client certificate */
    char *key_file;
    bool verify_peer;
    bool verify_hostname;
    char *exchange;
    bool rewrite; /* topic_prefix */
    char *from;
    char *to;
    size_t from_len, to_len;
    int64_t confirm_timeout_ns;
    int64_t connect_timeout_ns;
    int64_t reconnect_max_ns;
    int heartbeat_s;
    char where[256]; /* FILE:LINE:COL of the options, for init's errors */
    bool mandatory;  /* publish mandatory: a basic.return is not done */
    bridge_fedora_t fedora;
    bridge_declare_t declare;
} bridge_options_t;

/* The plugin's option table (desc->options; ABI 1.2). */
extern const fanhub_opt_t bridge_option_table[];

/* Reads and checks the options against bridge_option_table. With
   read_secrets, keeps the password (init); without, only checks that it
   can be read (check). 0, or -1 with a
   one-line reason in err that never holds a secret. */
int bridge_options_read (const fanhub_host_t *host, fanhub_ctx_t *ctx,
                         const fanhub_option_t *options, bool read_secrets, bridge_options_t *out,
                         char *err, size_t errlen);
void bridge_options_free (bridge_options_t *options);

/* What envelope: fedora-messaging adds to a message (fedora.c). */
typedef struct {
    char message_id[80]; /* the body's msg_id, or a new UUID4 */
    char sent_at[32];    /* ISO 8601, UTC: "2026-11-28T03:09:01+00:00" */
    const char *schema;  /* the options' (they outlive the job) */
    int severity;
} bridge_fedora_props_t;

/* One message handed from consume to the link thread: its routing key and
   body, copied (the hub's buffers live only during consume). */
typedef struct bridge_job {
    struct bridge_job *next;
    fanhub_ticket_t ticket;
    uint64_t seq;
    bool json;
    bool fedora; /* props holds the fedora-messaging properties */
    bridge_fedora_props_t props;
    size_t key_size;
    size_t body_size;
    char data[]; /* key, then body */
} bridge_job_t;

/* fedora.c: reads envelope, body, schema(s), severity(ies) (after the
   table); 0 or -1 with err. */
int bridge_fedora_read (const fanhub_host_t *host, const fanhub_option_t *options,
                        bridge_fedora_t *out, char *err, size_t errlen);
void bridge_fedora_free (bridge_fedora_t *fedora);
/* fedora.c: the job of one message in fedora-messaging's shape: the body
   to publish (the whole body, or its "msg" re-encoded), and the
   properties. NULL when out of memory. */
bridge_job_t *bridge_fedora_job (const bridge_fedora_t *fedora, const char *key, size_t key_size,
                                 const void *body, size_t body_size, int64_t received_ns);

/* fedora.c: the job's fedora-messaging properties into props (an
   amqp_basic_properties_t) and its headers (room for 4 more entries). */
void bridge_fedora_props (const bridge_job_t *job, void *props, void *headers);

/* declare.c: the binding keys (the bindings node, or NULL: "#") and the
   default hash exchange; 0 or -1 with err. */
int bridge_declare_read (const fanhub_host_t *host, const fanhub_option_t *bindings,
                         bridge_declare_t *out, char *err, size_t errlen);
/* declare.c: declares the topology on channel of conn (a
   amqp_connection_state_t); 0, or -1 with why. */
int bridge_declare_run (const bridge_declare_t *declare, const char *exchange, void *conn,
                        int channel, char *why, size_t whylen);
void bridge_declare_free (bridge_declare_t *declare);
/* declare.c: words for an RPC reply (an amqp_rpc_reply_t) that is not
   normal; whether it says the broker refused who we are or where we go
   (a configuration error, not a passing state). */
void bridge_reply_why (const void *reply, const char *what, char *why, size_t whylen);
bool bridge_refused_login (const void *reply);

/* held.c: returned messages per routing key, and each key's probe and
   backoff (the link's thread only). */
typedef struct bridge_held bridge_held_t;
bridge_held_t *bridge_held_new (void);
/* Frees every job still held. */
void bridge_held_destroy (bridge_held_t **self_p);
/* When job's key is held, takes job (behind the key's older ones): true. */
bool bridge_held_queue (bridge_held_t *self, bridge_job_t *job);
/* A returned job (probe: it was its key's probe: the backoff doubles); -1
   when out of memory (job not taken). */
int bridge_held_add (bridge_held_t *self, bridge_job_t *job, bool probe, int64_t now);
/* A key's oldest job when its probe is due (the key then waits for its
   outcome), or NULL. */
bridge_job_t *bridge_held_probe (bridge_held_t *self, int64_t now);
/* probe was confirmed: the rest of its key's jobs, in order (a list), and
   the key is no longer held. */
bridge_job_t *bridge_held_release (bridge_held_t *self, const bridge_job_t *probe);
/* When the next probe is due (INT64_MAX: none). */
int64_t bridge_held_next_ns (const bridge_held_t *self);
/* Every job held, as a list; nothing is held after. */
bridge_job_t *bridge_held_take_all (bridge_held_t *self);

/* Counters, each written by one thread, read at fini and shown by the
   hub as the consumer's own figures (ABI 1.6, host->metric_new; amqp.c
   names them): fanhub_plugin_amqp_NAME_total, derive-plugin_NAME. */
typedef enum {
    BRIDGE_PUBLISHED,    /* basic.publish sent */
    BRIDGE_CONFIRMED,    /* basic.ack received */
    BRIDGE_NACKED,       /* basic.nack received: RETRY */
    BRIDGE_LOST,         /* RETRY at a lost connection */
    BRIDGE_REFUSED_DOWN, /* consume answered RETRY: not connected */
    BRIDGE_CONNECTS,     /* connections made */
    BRIDGE_RETURNED,     /* basic.return: unroutable, RETRY */
    BRIDGE_LOOPED,       /* from bus.amqp: not published again */
    BRIDGE_COUNTERS
} bridge_counter_t;

typedef struct {
    atomic_uint_fast64_t n[BRIDGE_COUNTERS];
    const fanhub_host_t *host;
    fanhub_metric_t *metric[BRIDGE_COUNTERS]; /* NULL: a hub before 1.6 */
} bridge_counters_t;

/* Adds n to a counter and to the hub's figure of it. */
static inline void
bridge_count (bridge_counters_t *c, bridge_counter_t which, uint64_t n)
{
    atomic_fetch_add (&c->n[which], n);
    if (c->metric[which])
        c->host->metric_add (c->metric[which], (int64_t) n);
}

/* connect.c: a new connection to the broker (an amqp_connection_state_t)
   with channel BRIDGE_CHANNEL open in confirm mode, the exchange checked
   and the topology declared; NULL with why. *refused is set when the
   broker refused the login or the vhost, or has no such exchange (a
   configuration error, not a passing state). */
void *bridge_connect (const bridge_options_t *opts, bool *refused, char *why, size_t whylen);

/* The link: one connection to the broker, owned by its thread, which
   publishes the jobs consume hands it and completes each message when the
   broker confirms it (see link.c). */
typedef struct bridge_link bridge_link_t;

/* Makes the link and starts its thread. The first connection is tried
   here, before the thread starts: when the broker refuses the login or
   the vhost, or has no such exchange, the link is not made and err says why (a configuration
   error); a broker that cannot be reached is retried by the thread. opts
   must outlive the link. NULL with err on failure. */
bridge_link_t *bridge_link_new (const fanhub_host_t *host, fanhub_ctx_t *ctx,
                                const bridge_options_t *opts, bridge_counters_t *counters,
                                char *err, size_t errlen);
/* Hands job to the link: true, or false when the link is not connected
   (the caller keeps the job and answers RETRY). */
bool bridge_link_push (bridge_link_t *link, bridge_job_t *job);
/* Stops the thread, closes the connection, frees what is left. Messages
   not confirmed by then stay open (void for the hub after fini); returns
   how many. */
size_t bridge_link_destroy (bridge_link_t *link);

#endif
