/*  source_amqp - bus.amqp: messages from RabbitMQ queues, acked when done.
    See source_amqp.h.

    The actor polls three things at once: its pipe (a stop), the broker's
    socket, and an eventfd that the emit waiters of its deliveries bump
    when they become handled (on a consumer's thread). On each wake it
    settles the handled deliveries (ack, reject or nack, by delivery tag,
    on this thread, which alone uses the connection) and reads what the
    broker sent, without blocking, into the enqueuer's injection socket.
*/
#include "source_amqp_settings.h"

#include "actor.h"
#include "atomics.h"
#include "clock.h"
#include "emit.h"
#include "enqueuer.h"
#include "log.h"
#include "thread.h"

#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <czmq.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define S_BATCH_MAX 256 /* deliveries read per wake */
#define S_RECONNECT_FIRST_MS 100
#define S_CONNECT_TIMEOUT_S 5
#define S_POLL_MS 1000 /* idle wake: heartbeats are sent from it */

/* A delivery handed to the hub and not answered yet. */
typedef struct {
    fh_emit_t *emit;
    amqp_channel_t channel;
    uint64_t tag;
} s_open_t;

struct fh_source_amqp {
    fh_amqp_settings_t *settings;
    char *inject_endpoint;
    fh_source_count_fn *count;
    fh_source_halted_fn *halted; /* a fedora_messaging source's: is its consumer halted */
    void *count_arg;             /* both functions' */
    int wake_fd;                 /* eventfd: a waiter became handled */
    zactor_t *actor;
    atomic_bool started;  /* release: the actor's socket is up */
    atomic_bool finished; /* release: the actor is done with self */

    atomic_uint_fast64_t delivered, acked, rejected, requeued, reconnects, unacked;
    atomic_bool connected;

    /* Actor-private. */
    amqp_connection_state_t conn;
    void *push; /* to the enqueuer */
    s_open_t *open;
    size_t open_count, open_room;
    int64_t backoff_ms;
    uint64_t connects;
    bool stopping;         /* a stop came while handing a message over */
    bool *consuming;       /* by channel (from 1): basic.consume sent */
    int64_t standby_at_ns; /* when to consume from the other shards; 0: done */
    fh_ratelimit_t log_limit;
};

static void
s_wake (void *arg)
{
    fh_source_amqp_t *self = arg;
    uint64_t one = 1;
    /* Only a full counter (2^64 - 2 wakes unread) could refuse it. */
    ssize_t rc = write (self->wake_fd, &one, sizeof one);
    (void) rc;
}

/* What a librabbitmq reply says, in one line. */
static const char *
s_reply_text (amqp_rpc_reply_t reply, char *buf, size_t len)
{
    switch (reply.reply_type) {
    case AMQP_RESPONSE_NORMAL: snprintf (buf, len, "ok"); break;
    case AMQP_RESPONSE_NONE: snprintf (buf, len, "no reply"); break;
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        snprintf (buf, len, "%s", amqp_error_string2 (reply.library_error));
        break;
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            amqp_connection_close_t *close = reply.reply.decoded;
            snprintf (buf, len, "the broker closed the connection: %u %.*s", close->reply_code,
                      (int) close->reply_text.len, (const char *) close->reply_text.bytes);
        }
        else if (reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_channel_close_t *close = reply.reply.decoded;
            snprintf (buf, len, "the broker closed the channel: %u %.*s", close->reply_code,
                      (int) close->reply_text.len, (const char *) close->reply_text.bytes);
        }
        else
            snprintf (buf, len, "broker error, method 0x%08x", reply.reply.id);
        break;
    }
    return buf;
}

/* Checks the last RPC; on failure one line in why and -1. */
static int
s_rpc_ok (fh_source_amqp_t *self, const char *what, char *why, size_t len)
{
    amqp_rpc_reply_t reply = amqp_get_rpc_reply (self->conn);
    if (reply.reply_type == AMQP_RESPONSE_NORMAL)
        return 0;
    char text[256];
    snprintf (why, len, "%s: %s", what, s_reply_text (reply, text, sizeof text));
    return -1;
}

static size_t
s_channel_count (const fh_amqp_settings_t *settings)
{
    return settings->shards ? settings->shards : 1;
}

/* The name of the queue on channel ch (from 1). */
static void
s_queue_name (const fh_amqp_settings_t *settings, size_t ch, char *buf, size_t len)
{
    if (settings->shards)
        snprintf (buf, len, "%s.%zu", settings->queue, ch - 1);
    else
        snprintf (buf, len, "%s", settings->queue);
}

/* The queue arguments of a declare: type, single active consumer for
   shard queues, dead-letter exchange. */
static amqp_table_t
s_queue_arguments (const fh_amqp_settings_t *settings, amqp_table_entry_t *entries)
{
    int count = 0;
    entries[count].key = amqp_cstring_bytes ("x-queue-type");
    entries[count].value.kind = AMQP_FIELD_KIND_UTF8;
    entries[count++].value.value.bytes = amqp_cstring_bytes (settings->queue_type);
    if (settings->shards) {
        entries[count].key = amqp_cstring_bytes ("x-single-active-consumer");
        entries[count].value.kind = AMQP_FIELD_KIND_BOOLEAN;
        entries[count++].value.value.boolean = 1;
    }
    if (settings->dead_letter_exchange) {
        entries[count].key = amqp_cstring_bytes ("x-dead-letter-exchange");
        entries[count].value.kind = AMQP_FIELD_KIND_UTF8;
        entries[count++].value.value.bytes = amqp_cstring_bytes (settings->dead_letter_exchange);
    }
    return (amqp_table_t){count, entries};
}

/* declare: true. One queue bound to exchange by each binding key; or
   the consistent-hash exchange bound to exchange, and the shard queues
   bound to it with weight 1 each. Idempotent: declaring what exists with
   the same arguments changes nothing. */
static int
s_declare (fh_source_amqp_t *self, char *why, size_t len)
{
    const fh_amqp_settings_t *settings = self->settings;
    amqp_table_entry_t entries[3];
    amqp_table_t arguments = s_queue_arguments (settings, entries);
    const char *target = settings->shards ? settings->hash_exchange : settings->queue;
    if (settings->shards) {
        amqp_table_entry_t header
            = {amqp_cstring_bytes ("hash-header"), {.kind = AMQP_FIELD_KIND_UTF8}};
        if (settings->hash_header)
            header.value.value.bytes = amqp_cstring_bytes (settings->hash_header);
        amqp_table_t exchange_arguments = {settings->hash_header ? 1 : 0, &header};
        amqp_exchange_declare (self->conn, 1, amqp_cstring_bytes (settings->hash_exchange),
                               amqp_cstring_bytes ("x-consistent-hash"), 0, 1, 0, 0,
                               exchange_arguments);
        if (s_rpc_ok (self,
                      "declaring the consistent-hash exchange (is the "
                      "rabbitmq_consistent_hash_exchange plugin enabled?)",
                      why, len))
            return -1;
    }
    for (size_t ch = 1; ch <= (settings->shards ? settings->shards : 1); ch++) {
        char queue[300];
        s_queue_name (settings, ch, queue, sizeof queue);
        amqp_queue_declare (self->conn, 1, amqp_cstring_bytes (queue), 0, 1, 0, 0, arguments);
        if (s_rpc_ok (self, "declaring the queue", why, len))
            return -1;
        if (settings->shards) {
            amqp_queue_bind (self->conn, 1, amqp_cstring_bytes (queue),
                             amqp_cstring_bytes (settings->hash_exchange), amqp_cstring_bytes ("1"),
                             amqp_empty_table);
            if (s_rpc_ok (self, "binding a shard queue", why, len))
                return -1;
        }
    }
    for (size_t i = 0; settings->exchange[0] && i < settings->binding_count; i++) {
        amqp_bytes_t key = amqp_cstring_bytes (settings->bindings[i]);
        if (settings->shards)
            amqp_exchange_bind (self->conn, 1, amqp_cstring_bytes (target),
                                amqp_cstring_bytes (settings->exchange), key, amqp_empty_table);
        else
            amqp_queue_bind (self->conn, 1, amqp_cstring_bytes (target),
                             amqp_cstring_bytes (settings->exchange), key, amqp_empty_table);
        if (s_rpc_ok (self, "binding to the exchange", why, len))
            return -1;
    }
    return 0;
}

/* The socket, TLS included. NULL with why. */
static amqp_socket_t *
s_socket (fh_source_amqp_t *self, char *why, size_t len)
{
    const fh_amqp_settings_t *settings = self->settings;
    if (!settings->tls) {
        amqp_socket_t *socket = amqp_tcp_socket_new (self->conn);
        if (!socket)
            snprintf (why, len, "cannot make a socket");
        return socket;
    }
    amqp_socket_t *socket = amqp_ssl_socket_new (self->conn);
    if (!socket) {
        snprintf (why, len, "cannot make a TLS socket");
        return NULL;
    }
    amqp_ssl_socket_set_verify_peer (socket, settings->verify_peer);
    amqp_ssl_socket_set_verify_hostname (socket, settings->verify_hostname);
    if (settings->ca_file && amqp_ssl_socket_set_cacert (socket, settings->ca_file)) {
        snprintf (why, len, "tls.ca_file: cannot load %s", settings->ca_file);
        return NULL;
    }
    if (settings->cert_file
        && amqp_ssl_socket_set_key (socket, settings->cert_file, settings->key_file)) {
        snprintf (why, len, "tls: cannot load %s and %s", settings->cert_file, settings->key_file);
        return NULL;
    }
    return socket;
}

static void
s_disconnect (fh_source_amqp_t *self, bool polite)
{
    if (!self->conn)
        return;
    if (polite)
        amqp_connection_close (self->conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection (self->conn);
    self->conn = NULL;
    atomic_store (&self->connected, false);
    /* Their tags died with the connection: the broker delivers them again. */
    for (size_t i = 0; i < self->open_count; i++)
        fh_emit_unref (&self->open[i].emit);
    self->open_count = 0;
    atomic_store (&self->unacked, 0);
}

/* Whether this hub consumes from the shard queue of channel ch at once. */
static bool
s_preferred (const fh_amqp_settings_t *settings, size_t ch)
{
    return !settings->prefer_count || (ch - 1) % settings->prefer_count == settings->prefer_index;
}

/* The consumer tag names the hub, so that `rabbitmqctl list_consumers`
   tells which hub is the active consumer of a queue: fanhub@HOST:PID. */
static int
s_consume (fh_source_amqp_t *self, size_t ch, char *why, size_t len)
{
    char queue[300], what[400], host[128] = "", tag[200];
    s_queue_name (self->settings, ch, queue, sizeof queue);
    gethostname (host, sizeof host - 1);
    snprintf (tag, sizeof tag, "fanhub@%s:%ld", host, (long) getpid ());
    amqp_basic_consume (self->conn, (amqp_channel_t) ch, amqp_cstring_bytes (queue),
                        amqp_cstring_bytes (tag), 0, 0, 0, amqp_empty_table);
    snprintf (what, sizeof what, "consuming from queue %s", queue);
    if (s_rpc_ok (self, what, why, len))
        return -1;
    self->consuming[ch] = true;
    return 0;
}

/* Connects, logs in, opens a channel per queue, declares, consumes. */
static int
s_connect (fh_source_amqp_t *self, char *why, size_t len)
{
    const fh_amqp_settings_t *settings = self->settings;
    self->conn = amqp_new_connection ();
    if (!self->conn) {
        snprintf (why, len, "out of memory");
        return -1;
    }
    amqp_socket_t *socket = s_socket (self, why, len);
    struct timeval timeout = {S_CONNECT_TIMEOUT_S, 0};
    int rc = socket ? amqp_socket_open_noblock (socket, settings->host, settings->port, &timeout)
                    : AMQP_STATUS_OK;
    if (!socket || rc != AMQP_STATUS_OK) {
        if (socket)
            snprintf (why, len, "cannot connect to %s:%d: %s", settings->host, settings->port,
                      amqp_error_string2 (rc));
        s_disconnect (self, false);
        return -1;
    }
    amqp_rpc_reply_t reply = settings->fedora
                                 ? fh_amqp_fedora_login (self->conn, settings)
                                 : amqp_login (self->conn, settings->vhost, 0, 131072,
                                               settings->heartbeat_s, AMQP_SASL_METHOD_PLAIN,
                                               settings->user, settings->password);
    if (reply.reply_type != AMQP_RESPONSE_NORMAL) {
        char text[256];
        snprintf (why, len, "cannot log in to %s:%d vhost %s as %s: %s", settings->host,
                  settings->port, settings->vhost, settings->user,
                  s_reply_text (reply, text, sizeof text));
        s_disconnect (self, false);
        return -1;
    }
    size_t channels = s_channel_count (settings);
    for (size_t ch = 1; ch <= channels; ch++) {
        amqp_channel_open (self->conn, (amqp_channel_t) ch);
        if (s_rpc_ok (self, "opening a channel", why, len)) {
            s_disconnect (self, false);
            return -1;
        }
    }
    if (settings->fedora ? fh_amqp_fedora_declare (self->conn, settings, why, len)
                         : settings->declare && s_declare (self, why, len)) {
        s_disconnect (self, false);
        return -1;
    }
    /* prefer: the preferred shards now, the others (as a standby: a
       single active consumer is the first one registered) later. */
    for (size_t ch = 1; ch <= channels; ch++) {
        self->consuming[ch] = false;
        amqp_basic_qos (self->conn, (amqp_channel_t) ch, 0, (uint16_t) settings->prefetch, 0);
        if (s_rpc_ok (self, "setting the prefetch", why, len)
            || (settings->fedora && fh_amqp_fedora_consume (self->conn, settings, why, len))
            || (!settings->fedora && s_preferred (settings, ch)
                && s_consume (self, ch, why, len))) {
            s_disconnect (self, false);
            return -1;
        }
    }
    self->standby_at_ns
        = settings->prefer_count ? fh_clock_mono_ns () + settings->standby_delay_ms * 1000000 : 0;
    return 0;
}

/* Consumes the standby shards once standby_delay has passed. */
static int
s_consume_standby (fh_source_amqp_t *self, char *why, size_t len)
{
    if (!self->standby_at_ns || fh_clock_mono_ns () < self->standby_at_ns)
        return 0;
    self->standby_at_ns = 0;
    for (size_t ch = 1; ch <= s_channel_count (self->settings); ch++)
        if (!self->consuming[ch] && s_consume (self, ch, why, len))
            return -1;
    return 0;
}

/* Grows the table of open deliveries; false when out of memory. */
static bool
s_open_reserve (fh_source_amqp_t *self)
{
    if (self->open_count < self->open_room)
        return true;
    size_t room = self->open_room ? self->open_room * 2 : 64;
    s_open_t *grown = realloc (self->open, room * sizeof *grown);
    if (!grown)
        return false;
    self->open = grown;
    self->open_room = room;
    return true;
}

/* Hands one delivery to the enqueuer: [fh_inject_t, topic, body]. The
   first frame waits while the injection pipe is full, watching for a
   stop; the rest of a message follows its first frame whatever the
   high-water mark. False when it was not handed over. */
static bool
s_inject (fh_source_amqp_t *self, zsock_t *pipe, amqp_envelope_t *envelope)
{
    fh_emit_t *emit = s_open_reserve (self) ? fh_emit_new (self->count (self->count_arg)) : NULL;
    if (!emit)
        return false;
    fh_emit_set_notify (emit, s_wake, self);
    if (self->settings->target && fh_emit_set_target (emit, self->settings->target) != 0) {
        fh_emit_abandon (emit);
        fh_emit_unref (&emit);
        return false;
    }
    fh_inject_t header = {emit, self->settings->target != NULL, true};
    while (zmq_send (self->push, &header, sizeof header, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        zmq_pollitem_t item = {zsock_resolve (pipe), 0, ZMQ_POLLIN, 0};
        if (zmq_errno () != EAGAIN || zmq_poll (&item, 1, 10) != 0) {
            self->stopping = true;  /* the stop is read no more: the actor ends */
            fh_emit_abandon (emit); /* the message's reference */
            fh_emit_unref (&emit);
            return false;
        }
    }
    const fh_amqp_settings_t *settings = self->settings;
    fh_buf_t wrapped = {0};
    amqp_bytes_t body = envelope->message.body;
    if (settings->fedora_envelope && fh_amqp_fedora_envelope (envelope, &wrapped) == 0)
        body = (amqp_bytes_t){wrapped.size, wrapped.data};
    /* A fedora_messaging consumer's third frame: the properties its
       Message is made of (the runner reads it, fm.py). */
    fh_buf_t properties = {0};
    if (settings->fedora
        && fh_amqp_fedora_properties (envelope, fh_amqp_fedora_queue (settings, envelope),
                                      &properties))
        properties.size = 0;
    bool third = settings->fedora || settings->loop_guard;
    zmq_send (self->push, envelope->routing_key.bytes, envelope->routing_key.len, ZMQ_SNDMORE);
    zmq_send (self->push, body.bytes, body.len, third ? ZMQ_SNDMORE : 0);
    if (settings->fedora)
        zmq_send (self->push, properties.data, properties.size, 0);
    else if (settings->loop_guard)
        zmq_send (self->push, FH_AMQP_MARK, sizeof FH_AMQP_MARK - 1, 0);
    free (wrapped.data);
    free (properties.data);
    self->open[self->open_count++] = (s_open_t){emit, envelope->channel, envelope->delivery_tag};
    atomic_store (&self->unacked, self->open_count);
    return true;
}

/* What to tell the broker about a handled delivery. */
typedef enum { S_ACK, S_REJECT, S_REQUEUE } s_answer_t;

typedef struct {
    bool taken, refused;
} s_tally_t;

static void
s_tally (const char *consumer, fh_outcome_t outcome, void *arg)
{
    (void) consumer;
    s_tally_t *tally = arg;
    tally->refused |= outcome == FH_OUTCOME_DROPPED;
    tally->taken |= outcome == FH_OUTCOME_COMPLETED || outcome == FH_OUTCOME_FAILED
                    || outcome == FH_OUTCOME_COALESCED || outcome == FH_OUTCOME_SPILLED;
}

static s_answer_t
s_answer (const fh_amqp_settings_t *settings, fh_emit_t *emit)
{
    int matched = fh_emit_matched (emit);
    if (matched < 0)
        return S_REJECT;  /* malformed */
    if (settings->target) /* fedora-messaging's answers (docs/porting.md) */
        return fh_emit_outcome (emit, settings->target) == FH_OUTCOME_COMPLETED ? S_ACK : S_REQUEUE;
    s_tally_t tally = {matched == 0, false};
    fh_emit_each_outcome (emit, s_tally, &tally);
    return tally.taken || !tally.refused ? S_ACK : S_REQUEUE;
}

/* Answers every handled delivery; keeps the rest in their order. False
   when the connection failed. */
static bool
s_settle (fh_source_amqp_t *self)
{
    size_t kept = 0;
    bool ok = true;
    for (size_t i = 0; i < self->open_count; i++) {
        s_open_t *entry = &self->open[i];
        if (!ok || !fh_emit_is_handled (entry->emit)) {
            self->open[kept++] = *entry;
            continue;
        }
        int rc;
        switch (s_answer (self->settings, entry->emit)) {
        case S_ACK:
            rc = amqp_basic_ack (self->conn, entry->channel, entry->tag, 0);
            fh_bump (&self->acked);
            break;
        case S_REJECT:
            rc = amqp_basic_reject (self->conn, entry->channel, entry->tag, 0);
            fh_bump (&self->rejected);
            break;
        default:
            rc = amqp_basic_nack (self->conn, entry->channel, entry->tag, 0, 1);
            fh_bump (&self->requeued);
            break;
        }
        fh_emit_unref (&entry->emit);
        if (rc != AMQP_STATUS_OK) {
            fh_log_limited (&self->log_limit, FANHUB_LOG_WARNING,
                            "bus.amqp: answering the broker failed: %s", amqp_error_string2 (rc));
            ok = false;
        }
    }
    self->open_count = kept;
    atomic_store (&self->unacked, kept);
    return ok;
}

/* A frame other than a delivery: a close or a cancel ends the
   connection (the caller reconnects); anything else is ignored. */
static bool
s_other_frame (fh_source_amqp_t *self)
{
    amqp_frame_t frame;
    struct timeval now = {0, 0};
    int rc = amqp_simple_wait_frame_noblock (self->conn, &frame, &now);
    if (rc == AMQP_STATUS_TIMEOUT)
        return true;
    if (rc != AMQP_STATUS_OK) {
        fh_warning ("bus.amqp: connection lost: %s", amqp_error_string2 (rc));
        return false;
    }
    if (frame.frame_type != AMQP_FRAME_METHOD)
        return true;
    switch (frame.payload.method.id) {
    case AMQP_CONNECTION_CLOSE_METHOD:
    case AMQP_CHANNEL_CLOSE_METHOD: {
        amqp_rpc_reply_t reply = {AMQP_RESPONSE_SERVER_EXCEPTION, frame.payload.method, 0};
        char text[256];
        fh_warning ("bus.amqp: %s", s_reply_text (reply, text, sizeof text));
        return false;
    }
    case AMQP_BASIC_CANCEL_METHOD:
        fh_warning ("bus.amqp: the broker cancelled a consumer (queue deleted?)");
        return false;
    default: return true;
    }
}

/* Reads what the broker sent, without waiting. False when the
   connection failed. */
static bool
s_receive (fh_source_amqp_t *self, zsock_t *pipe)
{
    for (int n = 0; n < S_BATCH_MAX; n++) {
        amqp_maybe_release_buffers (self->conn);
        amqp_envelope_t envelope;
        struct timeval now = {0, 0};
        amqp_rpc_reply_t reply = amqp_consume_message (self->conn, &envelope, &now, 0);
        if (reply.reply_type == AMQP_RESPONSE_NORMAL) {
            fh_bump (&self->delivered);
            bool handed = s_inject (self, pipe, &envelope);
            amqp_destroy_envelope (&envelope);
            if (!handed)
                return false; /* stopping, or out of memory: it is delivered again */
            continue;
        }
        if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
            && reply.library_error == AMQP_STATUS_TIMEOUT)
            return true;
        if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
            && reply.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
            if (!s_other_frame (self))
                return false;
            continue;
        }
        char text[256];
        fh_warning ("bus.amqp: connection lost: %s", s_reply_text (reply, text, sizeof text));
        return false;
    }
    return true;
}

/* Waits up to ms for the pipe or a wake. True when a stop came. */
static bool
s_wait (fh_source_amqp_t *self, zsock_t *pipe, int fd, long ms)
{
    zmq_pollitem_t items[] = {
        {zsock_resolve (pipe), 0, ZMQ_POLLIN, 0},
        {NULL, self->wake_fd, ZMQ_POLLIN, 0},
        {NULL, fd, ZMQ_POLLIN, 0},
    };
    if (zmq_poll (items, fd >= 0 ? 3 : 2, ms) < 0 && zmq_errno () != EINTR)
        return true; /* the context is going away */
    if (items[1].revents & ZMQ_POLLIN) {
        uint64_t count;
        ssize_t rc = read (self->wake_fd, &count, sizeof count);
        (void) rc;
    }
    if (!(items[0].revents & ZMQ_POLLIN))
        return false;
    char *command = zstr_recv (pipe);
    bool stop = !command || streq (command, "$TERM");
    zstr_free (&command);
    return stop;
}

/* A fedora_messaging consumer halted (HaltConsumer, or an exception):
   as fedora-messaging's consumer stops, the connection closes and the
   broker requeues what it had not acked; the source connects again once
   the consumer is no longer halted (a restart, a reload). True when a
   stop came. */
static bool
s_halt (fh_source_amqp_t *self, zsock_t *pipe)
{
    fh_warning ("consumer '%s': halted: stops consuming from %s; the broker requeues its %zu "
                "unacked message(s)",
                self->settings->target, self->settings->queue, self->open_count);
    s_disconnect (self, true);
    while (self->halted (self->count_arg, self->settings->target))
        if (s_wait (self, pipe, -1, 200))
            return true;
    return false;
}

/* One connection's life: connect (or wait the backoff), then serve it
   until it fails or a stop comes. True when a stop came. */
static bool
s_session (fh_source_amqp_t *self, zsock_t *pipe)
{
    const fh_amqp_settings_t *settings = self->settings;
    char why[512];
    if (s_connect (self, why, sizeof why) != 0) {
        fh_log_limited (&self->log_limit, FANHUB_LOG_WARNING,
                        "bus.amqp: %s; trying again in %lld ms", why, (long long) self->backoff_ms);
        int64_t until = fh_clock_mono_ns () + self->backoff_ms * 1000000;
        self->backoff_ms = self->backoff_ms * 2 < settings->reconnect_max_ms
                               ? self->backoff_ms * 2
                               : settings->reconnect_max_ms;
        for (int64_t now = fh_clock_mono_ns (); now < until; now = fh_clock_mono_ns ())
            if (s_wait (self, pipe, -1, (long) ((until - now) / 1000000 + 1)))
                return true;
        return false;
    }
    if (self->connects++)
        fh_bump (&self->reconnects);
    self->backoff_ms = S_RECONNECT_FIRST_MS;
    atomic_store (&self->connected, true);
    fh_info ("%s%s%s: consuming from %s%s%s on %s:%d vhost %s (prefetch %zu)",
             settings->target ? "consumer '" : "bus.amqp", settings->target ? settings->target : "",
             settings->target ? "'" : "", settings->queue, settings->shards ? ".*" : "",
             settings->fedora ? " and the file's other queues" : "", settings->host, settings->port,
             settings->vhost, settings->prefetch);
    int fd = amqp_get_sockfd (self->conn);
    for (;;) {
        if (!s_settle (self))
            break;
        if (self->halted && self->halted (self->count_arg, settings->target))
            return s_halt (self, pipe);
        if (!s_receive (self, pipe) || self->stopping)
            break;
        if (s_consume_standby (self, why, sizeof why) != 0) {
            fh_warning ("bus.amqp: %s", why);
            break;
        }
        /* Data librabbitmq (or TLS) holds already is not seen by poll. */
        bool buffered = amqp_data_in_buffer (self->conn) || amqp_frames_enqueued (self->conn);
        long wait_ms = buffered ? 0 : settings->tls ? 50 : S_POLL_MS;
        if (self->standby_at_ns)
            wait_ms = wait_ms < 100 ? wait_ms : 100;
        if (s_wait (self, pipe, fd, wait_ms)) {
            s_settle (self);
            s_disconnect (self, true);
            return true;
        }
    }
    s_disconnect (self, self->stopping);
    return self->stopping;
}

static void
s_actor (zsock_t *pipe, void *args)
{
    fh_source_amqp_t *self = args;
    fh_thread_name_self ("fh:amqp");
    zsock_t *push = zsock_new (ZMQ_PUSH);
    if (push) {
        zsock_set_sndhwm (push, 0); /* prefetch bounds what is in flight */
        if (zsock_connect (push, "%s", self->inject_endpoint) != 0)
            zsock_destroy (&push);
    }
    self->push = push ? zsock_resolve (push) : NULL;
    atomic_store_explicit (&self->started, push != NULL, memory_order_release);
    zsock_signal (pipe, 0);
    self->backoff_ms = S_RECONNECT_FIRST_MS;
    while (push && !s_session (self, pipe))
        ;
    zsock_destroy (&push);
    free (self->open);
    self->open = NULL;
    atomic_store_explicit (&self->finished, true, memory_order_release);
}

/* Takes settings (NULL: err says why). */
static fh_source_amqp_t *
s_new (fh_amqp_settings_t *settings, const char *inject_endpoint, fh_source_count_fn *count,
       fh_source_halted_fn *halted, void *arg, char *err, size_t errlen)
{
    fh_source_amqp_t *self = calloc (1, sizeof *self);
    if (!self) {
        fh_amqp_settings_destroy (&settings);
        snprintf (err, errlen, "bus.amqp: out of memory");
        return NULL;
    }
    self->wake_fd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC);
    self->settings = settings;
    self->inject_endpoint = strdup (inject_endpoint);
    self->consuming = self->settings
                          ? calloc (s_channel_count (self->settings) + 1, sizeof *self->consuming)
                          : NULL;
    self->count = count;
    self->halted = halted;
    self->count_arg = arg;
    if (self->settings /* else err says why */
        && (self->wake_fd < 0 || !self->inject_endpoint || !self->consuming))
        snprintf (err, errlen, "bus.amqp: cannot start: %s", strerror (errno));
    else if (self->settings) {
        self->actor = zactor_new (s_actor, self);
        if (!self->actor || !atomic_load_explicit (&self->started, memory_order_acquire)) {
            snprintf (err, errlen, "bus.amqp: cannot start its thread");
            zactor_destroy (&self->actor);
        }
    }
    if (!self->actor)
        fh_source_amqp_destroy (&self);
    return self;
}

fh_source_amqp_t *
fh_source_amqp_new (const fanhub_option_t *tree, const char *inject_endpoint,
                    fh_source_count_fn *count, void *count_arg, char *err, size_t errlen)
{
    return s_new (fh_amqp_settings_new (tree, err, errlen), inject_endpoint, count, NULL, count_arg,
                  err, errlen);
}

fh_source_amqp_t *
fh_source_amqp_new_fedora (const struct json_t *fm, const char *consumer,
                           const char *inject_endpoint, fh_source_count_fn *count,
                           fh_source_halted_fn *halted, void *arg, char *err, size_t errlen)
{
    return s_new (fh_amqp_settings_from_fedora (fm, consumer, err, errlen), inject_endpoint, count,
                  halted, arg, err, errlen);
}

void
fh_source_amqp_stop (fh_source_amqp_t *self)
{
    fh_actor_join (&self->actor, &self->finished);
}

void
fh_source_amqp_destroy (fh_source_amqp_t **self_p)
{
    fh_source_amqp_t *self = *self_p;
    if (!self)
        return;
    fh_source_amqp_stop (self);
    if (self->wake_fd >= 0)
        close (self->wake_fd);
    fh_amqp_settings_destroy (&self->settings);
    free (self->consuming);
    free (self->inject_endpoint);
    free (self);
    *self_p = NULL;
}

void
fh_source_amqp_counts (fh_source_amqp_t *self, fh_source_amqp_counts_t *out)
{
    out->delivered = atomic_load (&self->delivered);
    out->acked = atomic_load (&self->acked);
    out->rejected = atomic_load (&self->rejected);
    out->requeued = atomic_load (&self->requeued);
    out->reconnects = atomic_load (&self->reconnects);
    out->unacked = atomic_load (&self->unacked);
    out->connected = atomic_load (&self->connected);
}
