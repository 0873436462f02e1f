/*  enqueuer - the thread that owns the bus. See enqueuer.h.

    The receive path works on zmq_msg_t directly: CZMQ's zmsg/zframe would
    allocate per frame. Frames are received into a scratch array sized for
    bus.max_frames, then moved (not copied) into one fh_msg_t that every
    matching consumer shares.
*/
#include "enqueuer.h"

#include "atomics.h"
#include "clock.h"
#include "fdlimit.h"
#include "gaps.h"
#include "log.h"
#include "shard.h"
#include "validate.h"
#include "zap.h"

#include <assert.h>
#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>

#ifndef ZMQ_ZERO_COPY_RECV
#define ZMQ_ZERO_COPY_RECV 10 /* a context option of libzmq >= 4.3, in its draft API */
#endif
#define BATCH_MAX 4096 /* messages per wake-up before looking at the pipe */

struct fh_enqueuer {
    /* Written by the actor only. */
    alignas (FH_CACHE_LINE) atomic_uint_fast64_t received;
    atomic_uint_fast64_t malformed_by_reason[FH_MALFORMED_REASONS];
    atomic_uint_fast64_t unrouted;
    atomic_int *peers; /* per endpoint: connect first, then bind */
    atomic_int bind_peers;              /* the bind endpoints' together */
    atomic_uint_fast64_t auth_denied;   /* handshakes refused: key, address,
                                           mechanism, cryptography */
    atomic_uint_fast64_t peers_refused; /* connections shed above max_peers */
    fh_handled_t handled; /* messages every matching consumer refused */
    fh_gaps_t *gaps;      /* bus.gap_detection, or NULL */
    char inject_endpoint[64];
    void *publish;        /* PUB on bus.publish, for emitted messages; or NULL */
    zsock_t *pipe;        /* the actor's pipe, watched while blocked */
    void *pipe_handle;
    void *sub_handle;     /* the SUB socket, for a swap while blocked */
    bool terminating;     /* $TERM seen while blocked */

    alignas (FH_CACHE_LINE) const fh_config_t *config;
    fh_trigger_t *trigger;
    fh_consumer_t **consumers;
    size_t consumer_count;
    zactor_t *actor;
    char start_error[512]; /* set by the actor when setup failed */
    atomic_bool setup_done; /* release: start_error is final */
    atomic_bool finished;   /* release: the actor is done with self */

    /* Actor-private. */
    int max_peers;       /* per bind endpoint, resolved */
    int *bind_ports;     /* per bind endpoint: its tcp port once bound, or -1 */
    fh_zap_policy_t policies[2]; /* the ZAP domains: bus, publish */
    zmq_msg_t *frames;   /* room for max_frames + 1 */
    uint32_t *matches;   /* room for consumer_count */
    /* The consumers offered something since the last signal: only they may
       sleep with messages not yet signalled. */
    uint32_t *offered;   /* room for consumer_count */
    size_t offered_count;
    bool *offered_mark;  /* by consumer index */
    /* The message being handed out: the consumers it still goes to (a
       swap while blocked re-aims them; NULL: no longer one to offer to). */
    fh_consumer_t **targets; /* room for consumer_count */
    size_t target_next, target_count; /* [next, count) not yet offered */
    fh_msg_t *target_msg;
    uint64_t seq;
    fh_ratelimit_t malformed_log;
};

/* The end of a run of offers: wakes the consumers that sleep with
   messages offered since (the queues do not wake them at every push).
   Only the consumers offered something are looked at: with 1,000
   consumers and 3 matching, a run costs 3 looks, not 1,000. */
static void
s_signal_all (fh_enqueuer_t *self)
{
    for (size_t i = 0; i < self->offered_count; i++) {
        uint32_t index = self->offered[i];
        self->offered_mark[index] = false;
        fh_consumer_signal (self->consumers[index]);
    }
    self->offered_count = 0;
}

static inline void
s_note_offered (fh_enqueuer_t *self, uint32_t index)
{
    if (!self->offered_mark[index]) {
        self->offered_mark[index] = true;
        self->offered[self->offered_count++] = index;
    }
}

const char *
fh_malformed_reason_name (fh_malformed_reason_t reason)
{
    switch (reason) {
    case FH_MALFORMED_NO_BODY: return "no_body";
    case FH_MALFORMED_TOO_MANY_FRAMES: return "too_many_frames";
    case FH_MALFORMED_TOO_LARGE: return "too_large";
    case FH_MALFORMED_TOPIC_NOT_UTF8: return "topic_not_utf8";
    case FH_MALFORMED_REASONS: break;
    }
    return "unknown";
}

static void
s_count_malformed (fh_enqueuer_t *self, fh_malformed_reason_t reason,
                   size_t frames, size_t bytes)
{
    fh_bump (&self->malformed_by_reason[reason]);
    fh_log_limited (&self->malformed_log, FANHUB_LOG_WARNING,
                    "dropped a malformed bus message (%s: %zu frames, %zu bytes; limits %zu "
                    "frames, %zu bytes)",
                    fh_malformed_reason_name (reason), frames, bytes, self->config->max_frames,
                    self->config->max_message_bytes);
}

typedef struct s_swap s_swap_t;
static int s_apply_swap (fh_enqueuer_t *self, s_swap_t *swap, void *sub);

/* While a `block` consumer's queue is full: waits a moment, watching the
   actor pipe, and answers what comes at once: a stop ends the wait, a
   swap (a reload) is applied mid-message, so the main thread never waits
   on a blocked consumer. True when a stop came (the actor then ends its
   loop). */
static bool
s_blocked_wait (fh_enqueuer_t *self)
{
    if (self->terminating)
        return true;
    s_signal_all (self); /* the full queue's consumer must be awake */
    zmq_pollitem_t item = {self->pipe_handle, 0, ZMQ_POLLIN, 0};
    if (zmq_poll (&item, 1, 1) > 0 && (item.revents & ZMQ_POLLIN)) {
        char *command = NULL;
        void *arg = NULL;
        if (zsock_recv (self->pipe, "sp", &command, &arg) != 0 || !command
            || streq (command, "$TERM"))
            self->terminating = true;
        else if (streq (command, "SWAP"))
            zsock_signal (self->pipe,
                          (byte) (s_apply_swap (self, arg, self->sub_handle) == 0 ? 0 : 1));
        zstr_free (&command);
    }
    return self->terminating;
}

static void s_route (fh_enqueuer_t *self, zmq_msg_t *frames, size_t count, size_t seen,
                     size_t bytes, const fh_inject_t *inject);

/* What s_read_message read: frames kept, frames seen, bytes in all. */
typedef struct {
    size_t count, seen, bytes;
} s_read_t;

/* Reads one whole multipart message into self->frames: the first
   max_frames are kept, any more are read into the spare slot and closed,
   so the socket is left at a message boundary. The first frame is
   received with flags (ZMQ_DONTWAIT to poll); the rest wait, as ZeroMQ
   delivers a message's frames together. Returns false, keeping nothing,
   when no frame came (EAGAIN) or the socket failed midway (ETERM, EINTR:
   the poll loop will see). */
static bool
s_read_message (fh_enqueuer_t *self, void *socket, int flags, s_read_t *got)
{
    const size_t max_frames = self->config->max_frames;
    zmq_msg_t *frames = self->frames;
    *got = (s_read_t){ 0, 0, 0 };
    bool more = true;
    while (more) {
        zmq_msg_t *frame = &frames[got->count < max_frames ? got->count : max_frames];
        zmq_msg_init (frame);
        if (zmq_msg_recv (frame, socket, got->seen == 0 ? flags : 0) < 0) {
            zmq_msg_close (frame);
            for (size_t i = 0; i < got->count; i++)
                zmq_msg_close (&frames[i]);
            *got = (s_read_t){ 0, 0, 0 };
            return false;
        }
        got->seen++;
        got->bytes += zmq_msg_size (frame);
        more = zmq_msg_more (frame);
        if (got->count < max_frames)
            got->count++;
        else
            zmq_msg_close (frame);
    }
    return true;
}

/* The first frame of a message if one is waiting (frame is then the
   caller's to close); false, with nothing to close, when none is. */
static bool
s_recv_now (void *socket, zmq_msg_t *frame)
{
    zmq_msg_init (frame);
    if (zmq_msg_recv (frame, socket, ZMQ_DONTWAIT) >= 0)
        return true;
    zmq_msg_close (frame);
    return false;
}

/* Receives one whole multipart message and routes it. Returns false when
   the socket has nothing more (or is closing). */
static bool
s_receive_one (fh_enqueuer_t *self, void *sub)
{
    s_read_t got;
    if (!s_read_message (self, sub, ZMQ_DONTWAIT, &got))
        return false;
    fh_bump (&self->received);
    s_route (self, self->frames, got.count, got.seen, got.bytes, NULL);
    return true;
}

/* Checks, numbers and hands out one message whose frames[0..count-1] were
   read (seen frames, bytes in all). With an injection, reports to its
   waiter, and only its consumer gets it when it names one. */
static void
s_route (fh_enqueuer_t *self, zmq_msg_t *frames, size_t count, size_t seen, size_t bytes,
         const fh_inject_t *inject)
{
    fh_malformed_reason_t reason = fh_bus_check (
        seen, bytes, count ? zmq_msg_data (&frames[0]) : NULL, count ? zmq_msg_size (&frames[0]) : 0,
        self->config->max_frames, self->config->max_message_bytes);
    if (reason != FH_MALFORMED_REASONS) {
        s_count_malformed (self, reason, seen, bytes);
        for (size_t i = 0; i < count; i++)
            zmq_msg_close (&frames[i]);
        if (inject) {
            fh_emit_routed (inject->emit, -1);
            fh_emit_abandon (inject->emit);
        }
        return;
    }

    /* Well-formed: it gets a number and a time whether or not it routes. */
    if (self->gaps && !inject)
        fh_gaps_check (self->gaps, zmq_msg_data (&frames[0]), zmq_msg_size (&frames[0]),
                       zmq_msg_data (&frames[1]), zmq_msg_size (&frames[1]));
    uint64_t seq = ++self->seq;
    int64_t received_ns = fh_clock_mono_ns ();
    size_t matched = fh_trigger_match (self->trigger, zmq_msg_data (&frames[0]),
                                       zmq_msg_size (&frames[0]), self->matches);
    if (inject && inject->only) {
        /* A replay to one consumer: it gets it whatever its topics say.
           Found by name in the table of now: a swap since the request
           may have moved it, or removed it (then nobody gets it). */
        const char *target = fh_emit_target (inject->emit);
        matched = 0;
        for (size_t i = 0; i < self->consumer_count && target; i++)
            if (self->consumers[i] && strcmp (fh_consumer_name (self->consumers[i]), target) == 0) {
                self->matches[0] = (uint32_t) i;
                matched = 1;
                break;
            }
    }
    if (matched == 0) {
        fh_bump (&self->unrouted);
        for (size_t i = 0; i < count; i++)
            zmq_msg_close (&frames[i]);
        if (inject) {
            fh_emit_routed (inject->emit, 0);
            fh_emit_abandon (inject->emit);
        }
        return;
    }
    fh_msg_t *msg = fh_msg_new_cached (frames, (uint32_t) count, seq, received_ns);
    for (size_t i = 0; i < count; i++)
        zmq_msg_close (&frames[i]);
    if (!msg) {
        /* Out of memory: every matching consumer loses it, and counts it. */
        for (size_t i = 0; i < matched; i++)
            fh_consumer_count_drop (self->consumers[self->matches[i]], NULL);
        fh_error ("out of memory: dropped bus message %llu", (unsigned long long) seq);
        if (inject) {
            fh_emit_routed (inject->emit, (int) matched);
            fh_emit_abandon (inject->emit);
        }
        return;
    }
    /* shard: consumers that take only their share of the keys. */
    size_t kept = 0;
    for (size_t i = 0; i < matched; i++) {
        const fh_shard_t *shard = fh_consumer_shard (self->consumers[self->matches[i]]);
        if (!shard || (inject && inject->only) || fh_shard_takes (shard, msg))
            self->matches[kept++] = self->matches[i];
    }
    if (kept == 0) {
        fh_bump (&self->unrouted);
        fh_msg_destroy (&msg);
        if (inject) {
            fh_emit_routed (inject->emit, 0);
            fh_emit_abandon (inject->emit);
        }
        return;
    }
    matched = kept;
    if (inject)
        msg->emit = inject->emit;
    /* Every holder is counted before the first hand-off: a fast consumer
       may release its share before the last offer is made. */
    atomic_store_explicit (&msg->holders, (unsigned) matched + (inject != NULL),
                           memory_order_relaxed);
    for (size_t i = 0; i < matched; i++)
        self->targets[i] = self->consumers[self->matches[i]];
    self->target_count = matched;
    self->target_msg = msg;
    for (size_t i = 0; i < matched; i++) {
        self->target_next = i;
        fh_offer_t offer = FH_OFFER_REFUSED;
        /* overflow: block waits here, stalling every consumer, as
           documented; a stop ($TERM) ends the wait and drops it, a swap
           may re-aim the offer at the consumer's new instance. */
        while (self->targets[i]
               && (offer = fh_consumer_offer (self->targets[i], msg, &self->handled))
                      == FH_OFFER_FULL)
            if (s_blocked_wait (self)) {
                if (self->targets[i])
                    fh_consumer_count_drop (self->targets[i], msg);
                offer = FH_OFFER_REFUSED;
                break;
            }
        if (!self->targets[i])
            offer = FH_OFFER_REFUSED; /* its consumer was removed meanwhile */
        else
            /* After the offer: a swap while blocked re-aims targets[i] and
               renumbers matches[i] into the new table. */
            s_note_offered (self, self->matches[i]);
        if (offer != FH_OFFER_TAKEN)
            fh_msg_release (msg, &self->handled);
    }
    self->target_next = self->target_count = 0;
    self->target_msg = NULL;
    if (inject) {
        /* The extra hold kept the message alive until every outcome of the
           hand-off was written; now the waiter may read them. */
        fh_emit_routed (inject->emit, (int) matched);
        fh_msg_release (msg, &self->handled);
    }
}

/* An injected message from the control actor. */
static void
s_receive_injected (fh_enqueuer_t *self, void *pull)
{
    zmq_msg_t header;
    if (!s_recv_now (pull, &header))
        return;
    /* An internal message: its shape is the control actor's promise. */
    assert (zmq_msg_size (&header) == sizeof (fh_inject_t) && zmq_msg_more (&header));
    fh_inject_t inject;
    memcpy (&inject, zmq_msg_data (&header), sizeof inject);
    zmq_msg_close (&header);
    fh_emit_acquire (inject.emit);
    /* A read cut short (the hub is stopping) routes as an empty message:
       malformed, so its waiter still hears an answer. */
    s_read_t got;
    s_read_message (self, pull, 0, &got);
    zmq_msg_t *frames = self->frames;
    size_t count = got.count;
    if (inject.source)
        fh_bump (&self->received);
    /* An emit (not a replay to one consumer) also goes on the bus. */
    if (self->publish && !inject.only && !inject.source && got.seen == count)
        for (size_t i = 0; i < count; i++) {
            zmq_msg_t copy;
            zmq_msg_init (&copy);
            zmq_msg_copy (&copy, &frames[i]);
            if (zmq_msg_send (&copy, self->publish,
                              ZMQ_DONTWAIT | (i + 1 < count ? ZMQ_SNDMORE : 0)) < 0)
                zmq_msg_close (&copy);
        }
    s_route (self, frames, count, got.seen, got.bytes, &inject);
    s_signal_all (self);
}

/* The port of a tcp:// address, or -1. */
static int
s_port_of (const char *address)
{
    const char *colon = strncmp (address, "tcp://", 6) == 0 ? strrchr (address, ':') : NULL;
    return colon ? atoi (colon + 1) : -1;
}

/* The endpoint a monitor event is about: the configured string when it
   matches. A connection accepted on a bind endpoint is named by its local
   address (tcp://127.0.0.1:P for a bind on a wildcard address or on
   localhost): the bind endpoint whose port it is. When neither
   names one, the only endpoint of that kind (fallback); SIZE_MAX when
   unknown. */
static size_t
s_endpoint_index (fh_enqueuer_t *self, const char *address, bool accepted, bool fallback)
{
    const fh_config_t *config = self->config;
    const fh_strlist_t *list = accepted ? &config->bind : &config->connect;
    size_t base = accepted ? config->connect.count : 0;
    for (size_t i = 0; i < list->count; i++)
        if (strcmp (list->items[i], address) == 0)
            return base + i;
    int port = accepted ? s_port_of (address) : -1;
    for (size_t i = 0; port > 0 && i < list->count; i++)
        if (self->bind_ports[i] == port)
            return base + i;
    return fallback && list->count == 1 ? base : SIZE_MAX;
}

/* A connection accepted on a bind endpoint that has max_peers already:
   the descriptor goes back at once, before the table fills up (libzmq
   aborts when an accept of the control socket finds it full). libzmq owns
   the descriptor, so it is shut down, not closed: libzmq sees the
   connection end and closes it itself. The descriptor may have been
   closed and reused since the event was sent, so it is shut down only
   when it is still a TCP connection on this endpoint's port. */
static void
s_shed (fh_enqueuer_t *self, const char *address, int fd)
{
    struct sockaddr_storage local;
    socklen_t size = sizeof local;
    int port = -1;
    if (getsockname (fd, (struct sockaddr *) &local, &size) == 0) {
        if (local.ss_family == AF_INET)
            port = ntohs (((struct sockaddr_in *) &local)->sin_port);
        else if (local.ss_family == AF_INET6)
            port = ntohs (((struct sockaddr_in6 *) &local)->sin6_port);
    }
    if (port < 0 || port != s_port_of (address))
        return;
    if (shutdown (fd, SHUT_RDWR) != 0)
        return;
    uint64_t refused = atomic_load (&self->peers_refused);
    fh_bump (&self->peers_refused);
    if (refused == 0 || (refused & (refused + 1)) == 0) /* 1, 2, 4, 8, ... */
        fh_warning ("bus: %s has %d peers, its bus.max_peers: refused a connection "
                    "(%llu so far)", address, self->max_peers, (unsigned long long) refused + 1);
}

/* Handles one monitor event; false when none was waiting. */
static bool
s_handle_monitor_event (fh_enqueuer_t *self, void *monitor)
{
    zmq_msg_t frame;
    if (!s_recv_now (monitor, &frame))
        return false;
    uint16_t event = 0;
    uint32_t value = 0; /* the descriptor of ACCEPTED, the error of a failure */
    if (zmq_msg_size (&frame) >= 6) {
        memcpy (&event, zmq_msg_data (&frame), 2);
        memcpy (&value, (const char *) zmq_msg_data (&frame) + 2, 4);
    }
    bool more = zmq_msg_more (&frame);
    char address[512] = "";
    if (more) {
        zmq_msg_close (&frame);
        zmq_msg_init (&frame);
        if (zmq_msg_recv (&frame, monitor, 0) >= 0) {
            size_t n = zmq_msg_size (&frame);
            if (n >= sizeof address)
                n = sizeof address - 1;
            memcpy (address, zmq_msg_data (&frame), n);
            address[n] = '\0';
        }
    }
    zmq_msg_close (&frame);
    int delta = 0;
    bool accepted = false;
    switch (event) {
    case ZMQ_EVENT_CONNECTED: delta = 1; break;
    case ZMQ_EVENT_ACCEPTED: delta = 1; accepted = true; break;
    case ZMQ_EVENT_DISCONNECTED: delta = -1; break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
        /* A plaintext peer of a CURVE socket (or the reverse), or a CURVE
           handshake that does not decrypt: refused before ZAP is asked. */
        if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
            || value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
            fh_bump (&self->auth_denied);
        return true;
    default: return true;
    }
    /* A disconnect does not say which side made the connection: try the
       connect endpoints first, then the bind ones; by name, then the
       only one of its kind. */
    size_t i = s_endpoint_index (self, address, accepted, event != ZMQ_EVENT_DISCONNECTED);
    if (event == ZMQ_EVENT_DISCONNECTED && i == SIZE_MAX)
        i = s_endpoint_index (self, address, true, false);
    if (event == ZMQ_EVENT_DISCONNECTED && i == SIZE_MAX) {
        i = s_endpoint_index (self, address, false, true);
        if (i == SIZE_MAX || atomic_load (&self->peers[i]) == 0)
            i = s_endpoint_index (self, address, true, true);
    }
    if (i == SIZE_MAX)
        return true;
    int now = atomic_load (&self->peers[i]) + delta;
    atomic_store (&self->peers[i], now < 0 ? 0 : now);
    if (i >= self->config->connect.count) {
        int all = atomic_load (&self->bind_peers) + delta;
        atomic_store (&self->bind_peers, all < 0 ? 0 : all);
    }
    if (event == ZMQ_EVENT_ACCEPTED && now > self->max_peers)
        s_shed (self, address, (int) value);
    if (event == ZMQ_EVENT_CONNECTED)
        fh_info ("bus: connected to %s", address);
    else if (event == ZMQ_EVENT_DISCONNECTED && i < self->config->connect.count)
        fh_warning ("bus: disconnected from %s; ZeroMQ reconnects by itself", address);
    return true;
}

/* A reload's new routing: trigger table and consumers. */
struct s_swap {
    fh_trigger_t *trigger;
    fh_consumer_t **consumers;
    size_t consumer_count;
    atomic_bool ready; /* release/acquire: the pipe orders nothing C11 sees */
    atomic_bool done;  /* ... in either direction */
};

/* A swap in the middle of handing out a message: once acknowledged, the
   consumers of the old table that are not in the new one may be gone.
   The message still goes to those that stay, to the new instance of a
   replaced one (the same name: it follows its predecessor's messages),
   and is counted as dropped by a removed one, here, before the ack. */
static void
s_reaim_targets (fh_enqueuer_t *self, const s_swap_t *swap)
{
    for (size_t i = self->target_next; i < self->target_count; i++) {
        fh_consumer_t *target = self->targets[i];
        if (!target)
            continue;
        fh_consumer_t *next = NULL;
        size_t at = 0;
        for (size_t j = 0; j < swap->consumer_count && !next; j++)
            if (swap->consumers[j] == target)
                next = target, at = j;
        for (size_t j = 0; j < swap->consumer_count && !next; j++)
            if (strcmp (fh_consumer_name (swap->consumers[j]), fh_consumer_name (target)) == 0)
                next = swap->consumers[j], at = j;
        if (!next)
            fh_consumer_count_drop (target, self->target_msg);
        self->targets[i] = next;
        self->matches[i] = (uint32_t) at; /* its index in the new table */
    }
}

static bool
s_in_list (const char *const *list, size_t count, const char *s)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp (list[i], s) == 0)
            return true;
    return false;
}

/* Applies a swap between two messages: the SUB socket's subscriptions
   follow the new table (each prefix was subscribed once: unsubscribe what
   is gone, subscribe what is new). */
static int
s_apply_swap (fh_enqueuer_t *self, s_swap_t *swap, void *sub)
{
    (void) atomic_load_explicit (&swap->ready, memory_order_acquire);
    s_signal_all (self); /* the outgoing table's consumers too */
    if (swap->consumer_count > self->consumer_count) {
        uint32_t *matches = realloc (self->matches, swap->consumer_count * sizeof *matches);
        if (!matches)
            return -1;
        self->matches = matches;
        uint32_t *offered = realloc (self->offered, swap->consumer_count * sizeof *offered);
        if (!offered)
            return -1;
        self->offered = offered;
        bool *mark = realloc (self->offered_mark, swap->consumer_count * sizeof *mark);
        if (!mark)
            return -1;
        self->offered_mark = mark;
        memset (mark, 0, swap->consumer_count * sizeof *mark); /* none: just signalled */
        fh_consumer_t **targets = realloc (self->targets, swap->consumer_count * sizeof *targets);
        if (!targets)
            return -1;
        self->targets = targets;
    }
    s_reaim_targets (self, swap);
    const char *const *old_list, *const *new_list;
    size_t old_count = fh_trigger_subscriptions (self->trigger, &old_list);
    size_t new_count = fh_trigger_subscriptions (swap->trigger, &new_list);
    for (size_t i = 0; i < new_count; i++)
        if (!s_in_list (old_list, old_count, new_list[i]))
            zmq_setsockopt (sub, ZMQ_SUBSCRIBE, new_list[i], strlen (new_list[i]));
    for (size_t i = 0; i < old_count; i++)
        if (!s_in_list (new_list, new_count, old_list[i]))
            zmq_setsockopt (sub, ZMQ_UNSUBSCRIBE, old_list[i], strlen (old_list[i]));
    self->trigger = swap->trigger;
    self->consumers = swap->consumers;
    self->consumer_count = swap->consumer_count;
    atomic_store_explicit (&swap->done, true, memory_order_release);
    return 0;
}

/* An IPv6 literal (tcp://[::1]:5555) needs ZMQ_IPV6 on its socket: without
   it libzmq accepts the endpoint and never connects, silently. */
static bool
s_any_ipv6_literal (const fh_strlist_t *list)
{
    for (size_t i = 0; i < list->count; i++)
        if (strstr (list->items[i], "://["))
            return true;
    return false;
}

/* The ZAP handler of the bus sockets: bus.bind's peers are capped at
   max_peers each, bus.curve's keys and bus.allow_ip apply to both bind
   and publish. NULL (with start_error set) when it cannot start. */
static fh_zap_t *
s_start_zap (fh_enqueuer_t *self)
{
    const fh_config_t *config = self->config;
    size_t budget = fh_fdlimit_peer_budget ();
    size_t per_endpoint = budget / (config->bind.count ? config->bind.count : 1);
    size_t max_peers = config->max_peers ? config->max_peers : per_endpoint;
    if (max_peers > per_endpoint) {
        fh_warning ("bus.max_peers %zu is more than the descriptors allow (%zu per bind "
                    "endpoint, a reserve kept): using %zu", max_peers, per_endpoint,
                    per_endpoint ? per_endpoint : 1);
        max_peers = per_endpoint;
    }
    self->max_peers = max_peers > 0 ? (int) max_peers : 1;
    if (config->bind.count)
        fh_info ("bus: at most %d peers per bind endpoint (bus.max_peers)", self->max_peers);
    bool curve = config->curve.secret_key_file != NULL;
    for (int i = 0; i < 2; i++)
        self->policies[i] = (fh_zap_policy_t){
            .domain = i == 0 ? "fanhub-bus" : "fanhub-publish",
            .curve = curve,
            .allow = (const char *const *) config->curve.allow.items,
            .allow_count = config->curve.allow.count,
            .allow_dir = config->curve.allow_dir,
            .allow_ip = (const char *const *) config->allow_ip.items,
            .allow_ip_count = config->allow_ip.count,
            .peers = i == 0 ? &self->bind_peers : NULL,
            .max_peers = self->max_peers * (int) (config->bind.count ? config->bind.count : 1),
            .denied = &self->auth_denied,
        };
    fh_zap_t *zap = fh_zap_new (zsys_init (), self->policies, 2, self->start_error,
                                sizeof self->start_error);
    return zap;
}

/* The security options endpoints bound (server) or connected (client)
   next take: CURVE keys when bus.curve is on, the ZAP domain. */
static void
s_secure (fh_enqueuer_t *self, void *socket, const char *domain, bool server)
{
    const fh_config_t *config = self->config;
    zmq_setsockopt (socket, ZMQ_ZAP_DOMAIN, domain, strlen (domain));
    /* The config asks for server_public_key whenever there is a connect
       endpoint; without one, no client options are needed. */
    if (!config->curve.secret_key_file || (!server && !config->curve.server_public_key))
        return;
    int as_server = server;
    zmq_setsockopt (socket, ZMQ_CURVE_SERVER, &as_server, sizeof as_server);
    zmq_setsockopt (socket, ZMQ_CURVE_SECRETKEY, config->curve.secret_key, 40);
    if (!server) {
        zmq_setsockopt (socket, ZMQ_CURVE_PUBLICKEY, config->curve.public_key, 40);
        zmq_setsockopt (socket, ZMQ_CURVE_SERVERKEY, config->curve.server_public_key, 40);
    }
}

static void
s_enqueuer_actor (zsock_t *pipe, void *args)
{
    fh_enqueuer_t *self = args;
    const fh_config_t *config = self->config;
    /* Receive each message into a buffer of its own size. By default
       libzmq decodes into shared 8 KiB buffers that messages reference:
       cheap while messages come and go, but a queued message then pins its
       whole buffer and its share of a large per-buffer header, and a
       backlog of 1 KiB bodies took 1.9x their size in RSS. A socket reads
       the option when it is created. */
    zmq_ctx_set (zsys_init (), ZMQ_ZERO_COPY_RECV, 0);
    zsock_t *sub = zsock_new (ZMQ_SUB);
    if (!sub) {
        snprintf (self->start_error, sizeof self->start_error,
                  "cannot create the bus socket: %s", zmq_strerror (zmq_errno ()));
        atomic_store_explicit (&self->setup_done, true, memory_order_release);
        zsock_signal (pipe, 0);
        zsock_wait (pipe);
        atomic_store_explicit (&self->finished, true, memory_order_release);
        return;
    }
    zsock_set_rcvhwm (sub, config->rcvhwm);
    zsock_set_linger (sub, 0);
    /* Who may connect (zap.h): before any bind, since libzmq asks at the
       first handshake. */
    fh_zap_t *zap = NULL;
    if (config->bind.count + config->publish.count)
        zap = s_start_zap (self);
    if (s_any_ipv6_literal (&config->connect) || s_any_ipv6_literal (&config->bind))
        zsock_set_ipv6 (sub, 1);
    const char *const *subscriptions;
    size_t subscription_count = fh_trigger_subscriptions (self->trigger, &subscriptions);
    for (size_t i = 0; i < subscription_count; i++)
        zsock_set_subscribe (sub, subscriptions[i]);
    /* The socket monitor tells which endpoints have a connection; it must
       listen before the first connect, or early events are lost. */
    char monitor_endpoint[64];
    snprintf (monitor_endpoint, sizeof monitor_endpoint, "inproc://fanhub-monitor-%p",
              (void *) self);
    zsock_t *monitor = NULL;
    if (zmq_socket_monitor (zsock_resolve (sub), monitor_endpoint,
                               ZMQ_EVENT_CONNECTED | ZMQ_EVENT_ACCEPTED
                                   | ZMQ_EVENT_DISCONNECTED
                                   | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
               == 0) {
        monitor = zsock_new (ZMQ_PAIR);
        /* No high-water mark on this end makes the inproc pipe unbounded:
           libzmq drops monitor events past it, and a lost ACCEPTED would
           leave a peer uncounted by bus.max_peers (a flood of connections
           outruns this thread). */
        if (monitor)
            zsock_set_rcvhwm (monitor, 0);
        if (monitor && zsock_connect (monitor, "%s", monitor_endpoint) != 0)
            zsock_destroy (&monitor);
    }
    /* libzmq takes a socket's options when an endpoint is bound or
       connected: the bind endpoints get the server's, then the connect
       endpoints the client's. */
    s_secure (self, zsock_resolve (sub), "fanhub-bus", true);
    for (size_t i = 0; i < config->bind.count && !self->start_error[0]; i++) {
        if (zmq_bind (zsock_resolve (sub), config->bind.items[i]) != 0)
            snprintf (self->start_error, sizeof self->start_error,
                      "bus.bind: cannot bind %s: %s", config->bind.items[i],
                      zmq_strerror (zmq_errno ()));
        char bound[256] = "";
        size_t size = sizeof bound;
        zmq_getsockopt (zsock_resolve (sub), ZMQ_LAST_ENDPOINT, bound, &size);
        self->bind_ports[i] = s_port_of (bound); /* the port a wildcard one got */
    }
    s_secure (self, zsock_resolve (sub), "", false);
    for (size_t i = 0; i < config->connect.count && !self->start_error[0]; i++)
        if (zmq_connect (zsock_resolve (sub), config->connect.items[i]) != 0)
            snprintf (self->start_error, sizeof self->start_error,
                      "bus.connect: cannot connect %s: %s", config->connect.items[i],
                      zmq_strerror (zmq_errno ()));
    /* bus.publish: where emitted messages are published too. */
    zsock_t *publish = NULL;
    if (config->publish.count && !self->start_error[0]) {
        publish = zsock_new (ZMQ_PUB);
        if (publish) {
            zsock_set_linger (publish, 0);
            if (s_any_ipv6_literal (&config->publish))
                zsock_set_ipv6 (publish, 1);
            self->publish = zsock_resolve (publish);
            s_secure (self, self->publish, "fanhub-publish", true);
        }
        for (size_t i = 0; i < config->publish.count && !self->start_error[0]; i++)
            if (!publish || zmq_bind (self->publish, config->publish.items[i]) != 0)
                snprintf (self->start_error, sizeof self->start_error,
                          "bus.publish: cannot bind %s: %s", config->publish.items[i],
                          zmq_strerror (zmq_errno ()));
    }
    /* Injected messages (emit, replay) come from the control actor. */
    zsock_t *inject = zsock_new (ZMQ_PULL);
    snprintf (self->inject_endpoint, sizeof self->inject_endpoint, "inproc://fanhub-inject-%p",
              (void *) self);
    if (!self->start_error[0]
        && (!inject || zsock_bind (inject, "%s", self->inject_endpoint) != 0))
        snprintf (self->start_error, sizeof self->start_error,
                  "cannot bind the injection socket: %s", zmq_strerror (zmq_errno ()));
    /* The pipe hands over no memory ordering that TSan (or C11) sees. */
    atomic_store_explicit (&self->setup_done, true, memory_order_release);
    zsock_signal (pipe, 0);

    void *sub_handle = zsock_resolve (sub);
    self->sub_handle = sub_handle;
    self->pipe = pipe;
    self->pipe_handle = zsock_resolve (pipe);
    zmq_pollitem_t items[] = {
        {zsock_resolve (pipe), 0, ZMQ_POLLIN, 0},
        {sub_handle, 0, ZMQ_POLLIN, 0},
        {inject ? zsock_resolve (inject) : NULL, 0, ZMQ_POLLIN, 0},
        {monitor ? zsock_resolve (monitor) : NULL, 0, ZMQ_POLLIN, 0},
    };
    /* After a failed start only the pipe is polled, for $TERM. */
    int item_count = self->start_error[0] ? 1 : monitor ? 4 : 3;
    bool running = true;
    while (running) {
        if (zmq_poll (items, item_count, -1) < 0) {
            if (zmq_errno () == EINTR)
                continue;
            break; /* ETERM: the context is going away */
        }
        if (items[0].revents & ZMQ_POLLIN) {
            char *command = NULL;
            void *arg = NULL;
            if (zsock_recv (pipe, "sp", &command, &arg) != 0 || !command
                || streq (command, "$TERM"))
                running = false;
            else if (streq (command, "SWAP"))
                zsock_signal (pipe, (byte) (s_apply_swap (self, arg, sub_handle) == 0 ? 0 : 1));
            zstr_free (&command);
        }
        if (running && item_count > 1 && (items[1].revents & ZMQ_POLLIN))
            for (int i = 0; i < BATCH_MAX && !self->terminating
                            && s_receive_one (self, sub_handle);
                 i++)
                ;
        s_signal_all (self);
        if (self->terminating)
            running = false;
        if (running && item_count > 2 && (items[2].revents & ZMQ_POLLIN))
            s_receive_injected (self, zsock_resolve (inject));
        if (running && item_count > 3 && (items[3].revents & ZMQ_POLLIN))
            for (int i = 0; i < BATCH_MAX && s_handle_monitor_event (self, zsock_resolve (monitor));
                 i++)
                ;
    }
    if (monitor) {
        zmq_socket_monitor (sub_handle, NULL, 0);
        zsock_destroy (&monitor);
    }
    /* Injections still queued were never routed: tell their waiters. */
    while (inject && zsock_resolve (inject)) {
        zmq_msg_t frame;
        zmq_msg_init (&frame);
        if (zmq_msg_recv (&frame, zsock_resolve (inject), ZMQ_DONTWAIT) < 0) {
            zmq_msg_close (&frame);
            break;
        }
        if (zmq_msg_size (&frame) == sizeof (fh_inject_t)) {
            fh_inject_t lost;
            memcpy (&lost, zmq_msg_data (&frame), sizeof lost);
            fh_emit_routed (lost.emit, 0);
            fh_emit_abandon (lost.emit);
        }
        bool more = zmq_msg_more (&frame);
        zmq_msg_close (&frame);
        while (more) {
            zmq_msg_init (&frame);
            zmq_msg_recv (&frame, zsock_resolve (inject), 0);
            more = zmq_msg_more (&frame);
            zmq_msg_close (&frame);
        }
    }
    zsock_destroy (&inject);
    zsock_destroy (&publish);
    self->publish = NULL;
    zsock_destroy (&sub);
    fh_zap_destroy (&zap); /* after the sockets it answered for */
    for (size_t i = 0; i < config->connect.count + config->bind.count; i++)
        atomic_store (&self->peers[i], 0); /* the socket is gone */
    fh_msg_cache_drain (); /* this thread's cached messages */
    /* zactor_destroy waits for the actor through a pipe TSan cannot see. */
    atomic_store_explicit (&self->finished, true, memory_order_release);
}

fh_enqueuer_t *
fh_enqueuer_new (const fh_config_t *config, fh_trigger_t *trigger,
                 fh_consumer_t **consumers, size_t consumer_count, char *err,
                 size_t errlen)
{
    fh_enqueuer_t *self = aligned_alloc (FH_CACHE_LINE, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    memset (self, 0, sizeof *self);
    fh_handled_init (&self->handled);
    self->max_peers = INT_MAX; /* until the bind endpoints' budget is known */
    self->config = config;
    self->trigger = trigger;
    self->consumers = consumers;
    self->consumer_count = consumer_count;
    self->frames = calloc (config->max_frames + 1, sizeof *self->frames);
    self->matches = calloc (consumer_count ? consumer_count : 1, sizeof *self->matches);
    self->offered = calloc (consumer_count ? consumer_count : 1, sizeof *self->offered);
    self->offered_mark = calloc (consumer_count ? consumer_count : 1,
                                 sizeof *self->offered_mark);
    self->targets = calloc (consumer_count ? consumer_count : 1, sizeof *self->targets);
    self->peers = calloc (config->connect.count + config->bind.count + 1, sizeof *self->peers);
    self->bind_ports = calloc (config->bind.count + 1, sizeof *self->bind_ports);
    bool gaps_ok = true;
    if (config->gaps.counter) {
        self->gaps = fh_gaps_new (config->gaps.counter, config->gaps.producer,
                                  config->gaps.max_producers);
        gaps_ok = self->gaps != NULL;
    }
    /* Numbering goes on after what the spools kept from the last run:
       within a run, a seq names one message (a plugin may key by it). */
    for (size_t i = 0; i < consumer_count; i++) {
        uint64_t kept = fh_consumer_spool_max_seq (consumers[i]);
        if (kept > self->seq)
            self->seq = kept;
    }
    if (self->frames && self->matches && self->offered && self->offered_mark && self->targets
        && self->peers && self->bind_ports && gaps_ok)
        self->actor = zactor_new (s_enqueuer_actor, self);
    if (!self->actor) {
        snprintf (err, errlen, "cannot start the enqueuer: out of memory");
        fh_enqueuer_destroy (&self);
        return NULL;
    }
    bool ready = atomic_load_explicit (&self->setup_done, memory_order_acquire);
    if (!ready || self->start_error[0]) {
        snprintf (err, errlen, "%s", self->start_error);
        fh_enqueuer_destroy (&self);
        return NULL;
    }
    return self;
}

void
fh_enqueuer_stop (fh_enqueuer_t *self)
{
    zactor_destroy (&self->actor);
    (void) atomic_load_explicit (&self->finished, memory_order_acquire);
}

void
fh_enqueuer_destroy (fh_enqueuer_t **self_p)
{
    fh_enqueuer_t *self = *self_p;
    if (!self)
        return;
    fh_enqueuer_stop (self);
    free (self->frames);
    free (self->matches);
    free (self->offered);
    free (self->offered_mark);
    free (self->targets);
    free (self->peers);
    free (self->bind_ports);
    fh_gaps_destroy (&self->gaps);
    free (self);
    *self_p = NULL;
}

uint64_t
fh_enqueuer_handled (fh_enqueuer_t *self, fh_histogram_snapshot_t *end_to_end)
{
    if (end_to_end)
        fh_histogram_read (&self->handled.end_to_end, end_to_end);
    return atomic_load_explicit (&self->handled.handled, memory_order_acquire);
}

const char *
fh_enqueuer_inject_endpoint (fh_enqueuer_t *self)
{
    return self->inject_endpoint;
}

int
fh_enqueuer_swap (fh_enqueuer_t *self, fh_trigger_t *trigger, fh_consumer_t **consumers,
                  size_t consumer_count, char *err, size_t errlen)
{
    s_swap_t swap = {trigger, consumers, consumer_count, false, false};
    atomic_store_explicit (&swap.ready, true, memory_order_release);
    if (!self->actor || zsock_send (self->actor, "sp", "SWAP", &swap) != 0
        || zsock_wait (self->actor) != 0
        || !atomic_load_explicit (&swap.done, memory_order_acquire)) {
        snprintf (err, errlen, "the enqueuer did not take the new routing");
        return -1;
    }
    return 0;
}

int
fh_enqueuer_endpoint_peers (fh_enqueuer_t *self, size_t i)
{
    return atomic_load (&self->peers[i]);
}

void
fh_enqueuer_counts (fh_enqueuer_t *self, fh_enqueuer_counts_t *out)
{
    memset (out, 0, sizeof *out);
    out->unrouted = atomic_load (&self->unrouted);
    for (int i = 0; i < FH_MALFORMED_REASONS; i++) {
        out->malformed_by_reason[i] = atomic_load (&self->malformed_by_reason[i]);
        out->malformed += out->malformed_by_reason[i];
    }
    out->received = atomic_load (&self->received);
    out->auth_denied = atomic_load (&self->auth_denied);
    out->peers_refused = atomic_load (&self->peers_refused);
    if (self->gaps) {
        fh_gaps_counts_t gaps;
        fh_gaps_counts (self->gaps, &gaps);
        out->gap_detection = true;
        out->upstream_lost = gaps.lost;
        out->upstream_restarts = gaps.restarts;
        out->upstream_untracked = gaps.untracked;
        out->upstream_producers = gaps.producers;
    }
}
