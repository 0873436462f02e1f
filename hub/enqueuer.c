/*  enqueuer - the thread that owns the bus. See enqueuer.h, and
    enqueuer_internal.h for how its files share the work: this one is the
    actor and its loop, reading, checking, numbering and handing out
    messages, and the public API.

    The receive path works on zmq_msg_t directly: CZMQ's zmsg/zframe would
    allocate per frame. Frames are received straight into one fh_msg_t (a
    shell from the message cache: message.h) that every matching consumer
    shares; a message nobody takes leaves the shell for the next one.
*/
#include "enqueuer_internal.h"

#include "actor.h"
#include "clock.h"
#include "oom.h"
#include "shard.h"
#include "thread.h"
#include "validate.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ZMQ_ZERO_COPY_RECV
#define ZMQ_ZERO_COPY_RECV 10 /* a context option of libzmq >= 4.3, in its draft API */
#endif
#define BATCH_MAX 4096 /* messages per wake-up before looking at the pipe */
#define BEAT_MS 1000   /* the loop's longest wait, idle */
/* Under load, the end of a run of offers wakes the consumers at most this
   often (see s_wake_offered). */
#define LOAD_BATCH 32          /* a run this long means messages are waiting */
#define WAKE_HOLD_NS 1000000LL /* 1 ms: the longest a wake-up is held back */
#define WAKE_HOLD_POLL_MS 1    /* the loop's wait while one is held */

/* The end of the loop's turn that received `batch` bus messages. A short
   run means the bus has gone quiet: every consumer offered something is
   woken now, as always. A long run means more is waiting: a consumer that
   got many has been woken by its queue (every 256 pushes), and one that got
   a few (a sparse consumer: 3 of 100) would be woken, run, drain and park
   once per run for a handful of messages, a context switch each. So under
   load their wake-up is held back until the runs get short, the loop waits
   in vain, or it has been held WAKE_HOLD_NS; a quiet hub never holds one. */
static void
s_wake_offered (fh_enqueuer_t *self, int batch)
{
    if (self->offered_count == 0) {
        self->wake_held_since = 0;
        return;
    }
    if (batch >= LOAD_BATCH) {
        int64_t now = fh_clock_mono_ns ();
        if (!self->wake_held_since)
            self->wake_held_since = now;
        if (now - self->wake_held_since < WAKE_HOLD_NS)
            return;
    }
    self->wake_held_since = 0;
    fh_enq_signal_all (self);
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
s_count_malformed (fh_enqueuer_t *self, fh_malformed_reason_t reason, size_t frames, size_t bytes)
{
    fh_bump (&self->malformed_by_reason[reason]);
    fh_log_limited (&self->malformed_log, FANHUB_LOG_WARNING,
                    "dropped a malformed bus message (%s: %zu frames, %zu bytes; limits %zu "
                    "frames, %zu bytes)",
                    fh_malformed_reason_name (reason), frames, bytes, self->config->max_frames,
                    self->config->max_message_bytes);
}

/* Answers one command on the actor pipe: a SWAP (a reload) is applied at
   once. False when the command is $TERM (or the pipe broke): the actor
   then ends its loop. */
static bool
s_handle_pipe (fh_enqueuer_t *self)
{
    char *command = NULL;
    void *arg = NULL;
    bool running = true;
    if (zsock_recv (self->pipe, "sp", &command, &arg) != 0 || !command || streq (command, "$TERM"))
        running = false;
    else if (streq (command, "SWAP"))
        zsock_signal (self->pipe,
                      (byte) (fh_enq_apply_swap (self, arg, self->sub_handle) == 0 ? 0 : 1));
    zstr_free (&command);
    return running;
}

/* While a `block` consumer's queue is full: waits a moment, watching the
   actor pipe, and answers what comes at once: a stop ends the wait, a
   swap (a reload) is applied mid-message, so the main thread never waits
   on a blocked consumer. True when a stop came (the actor then ends its
   loop). */
#define BLOCKED_SAY_NS (3 * INT64_C (1000000000)) /* a wait this long is logged */

static bool
s_blocked_wait (fh_enqueuer_t *self)
{
    if (self->terminating)
        return true;
    /* Every consumer waits with the bus: say once whom it waits for. */
    int64_t now = fh_clock_mono_ns ();
    if (!self->blocked_since_ns)
        self->blocked_since_ns = now;
    else if (!self->blocked_said && now - self->blocked_since_ns > BLOCKED_SAY_NS
             && self->target_next < self->target_count && self->targets[self->target_next]) {
        self->blocked_said = true;
        fh_consumer_t *c = self->targets[self->target_next];
        fh_warning (
            "the bus has waited %.1f s for room in consumer '%s' (%s): no consumer gets "
            "a message meanwhile, and what the publishers send waits in libzmq's queue "
            "(bus.rcvhwm), beyond which libzmq drops it uncounted",
            (double) (now - self->blocked_since_ns) / 1e9, fh_consumer_name (c),
            fh_consumer_overflow (c) == FH_OVERFLOW_BLOCK
                ? "its overflow is block"
                : "its spool takes no more yet: the disk is behind, or a reload's hand-over");
    }
    fh_enq_signal_all (self); /* the full queue's consumer must be awake */
    zmq_pollitem_t item = {self->pipe_handle, 0, ZMQ_POLLIN, 0};
    if (zmq_poll (&item, 1, 1) > 0 && (item.revents & ZMQ_POLLIN) && !s_handle_pipe (self))
        self->terminating = true;
    return self->terminating;
}

/* What s_read_message read: frames kept (in self->shell's frames, or,
   without a shell, in self->frames), frames seen, bytes in all. */
typedef struct {
    zmq_msg_t *frames;
    size_t count, seen, bytes;
} s_read_t;

static void s_route (fh_enqueuer_t *self, const s_read_t *got, const fh_inject_t *inject);

/* The frames a message is read into: self->shell's, or self->frames
   when no shell can be had; their room (at most max_frames). */
static zmq_msg_t *
s_read_into (fh_enqueuer_t *self, size_t *room)
{
    const size_t max_frames = self->config->max_frames;
    if (!self->shell)
        self->shell = fh_msg_shell (self->shell_room);
    if (!self->shell) {
        *room = max_frames;
        return self->frames;
    }
    *room = self->shell->room < max_frames ? self->shell->room : max_frames;
    return self->shell->frames;
}

/* A message with more frames than its shell has room for: frames[0..
   count-1] move to a shell with room for 3, then for max_frames (or to
   self->frames when none can be had). The frames they are now in. */
static zmq_msg_t *
s_read_grow (fh_enqueuer_t *self, size_t count, size_t *room)
{
    const size_t max_frames = self->config->max_frames;
    fh_msg_t *old = self->shell;
    fh_msg_t *grown = fh_msg_shell (old->room < 3 ? 3 : (uint32_t) max_frames);
    zmq_msg_t *to = grown ? grown->frames : self->frames;
    for (size_t i = 0; i < count; i++) {
        zmq_msg_init (&to[i]);
        zmq_msg_move (&to[i], &old->frames[i]);
        zmq_msg_close (&old->frames[i]);
    }
    fh_msg_shell_put (old);
    self->shell = grown;
    *room = grown && grown->room < max_frames ? grown->room : max_frames;
    return to;
}

/* Reads one whole multipart message (s_read_into): the first max_frames
   are kept, any more are read and closed, so the socket is left at a
   message boundary. The first frame is received with flags (ZMQ_DONTWAIT
   to poll); the rest wait, as ZeroMQ delivers a message's frames
   together. Returns false, keeping nothing, when no frame came (EAGAIN)
   or the socket failed midway (ETERM, EINTR: the poll loop will see). */
static bool
s_read_message (fh_enqueuer_t *self, void *socket, int flags, s_read_t *got)
{
    const size_t max_frames = self->config->max_frames;
    size_t room;
    *got = (s_read_t){s_read_into (self, &room), 0, 0, 0};
    zmq_msg_t spare; /* a frame past max_frames */
    bool more = true;
    while (more) {
        if (got->count == room && room < max_frames)
            got->frames = s_read_grow (self, got->count, &room);
        zmq_msg_t *frame = got->count < room ? &got->frames[got->count] : &spare;
        zmq_msg_init (frame);
        if (zmq_msg_recv (frame, socket, got->seen == 0 ? flags : 0) < 0) {
            zmq_msg_close (frame);
            for (size_t i = 0; i < got->count; i++)
                zmq_msg_close (&got->frames[i]);
            got->count = got->seen = got->bytes = 0;
            return false;
        }
        got->seen++;
        got->bytes += zmq_msg_size (frame);
        more = zmq_msg_more (frame);
        if (frame != &spare)
            got->count++;
        else
            zmq_msg_close (frame);
    }
    /* The next shell has room for as many as this one needed. */
    self->shell_room = got->count > 2 ? 3 : 2;
    return true;
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
    s_route (self, &got, NULL);
    return true;
}

#ifdef FANHUB_PERF_SLOWDOWN
/* Only in tests/perf's fanhub_perf_slow: work added per offer (about 5 %
   of a K=1 delivery), the slowdown the instruction-count guard must catch. */
static void
s_perf_slowdown (void)
{
    for (volatile unsigned i = 0; i < FANHUB_PERF_SLOWDOWN; i++)
        ;
}
#else
static inline void
s_perf_slowdown (void)
{}
#endif

/* Offers msg to the consumers matches[0..matched-1]; an injected one
   (injected) keeps an extra hold for its waiter. */
static void
s_hand_out (fh_enqueuer_t *self, fh_msg_t *msg, size_t matched, bool injected)
{
    /* Every holder is counted before the first hand-off: a fast consumer
       may release its share before the last offer is made. */
    atomic_store_explicit (&msg->holders, (unsigned) matched + injected, memory_order_relaxed);
    for (size_t i = 0; i < matched; i++)
        self->targets[i] = self->consumers[self->matches[i]];
    self->target_count = matched;
    self->target_msg = msg;
    for (size_t i = 0; i < matched; i++) {
        self->target_next = i;
        s_perf_slowdown ();
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
    if (self->blocked_said)
        fh_info ("the bus goes on after %.1f s",
                 (double) (fh_clock_mono_ns () - self->blocked_since_ns) / 1e9);
    self->blocked_since_ns = 0;
    self->blocked_said = false;
    self->target_next = self->target_count = 0;
    self->target_msg = NULL;
}

/* A malformed message: counted, logged (rate-limited), freed, its waiter
   told. Injected ones count in received too (an AMQP delivery was
   already), so malformed <= received. */
static void
s_drop_malformed (fh_enqueuer_t *self, fh_malformed_reason_t reason, zmq_msg_t *frames,
                  size_t count, size_t seen, size_t bytes, const fh_inject_t *inject)
{
    if (inject && !inject->source)
        fh_bump (&self->received);
    s_count_malformed (self, reason, seen, bytes);
    for (size_t i = 0; i < count; i++)
        zmq_msg_close (&frames[i]);
    if (inject) {
        fh_emit_routed (inject->emit, -1);
        fh_emit_abandon (inject->emit);
    }
}

/* A replay to one consumer (inject->only): it gets the message whatever
   its topics say. Found by name in the table of now: a swap since the
   request may have moved it, or removed it (then nobody gets it).
   Returns the matches (0 or 1). */
static size_t
s_match_target (fh_enqueuer_t *self, const fh_inject_t *inject)
{
    const char *target = fh_emit_target (inject->emit);
    for (size_t i = 0; i < self->consumer_count && target; i++)
        if (self->consumers[i] && strcmp (fh_consumer_name (self->consumers[i]), target) == 0) {
            self->matches[0] = (uint32_t) i;
            return 1;
        }
    return 0;
}

/* Keeps, of matches[0..matched-1], the consumers whose share (shard:)
   takes msg; returns how many are left. */
static size_t
s_keep_shares (fh_enqueuer_t *self, const fh_msg_t *msg, size_t matched)
{
    size_t kept = 0;
    for (size_t i = 0; i < matched; i++)
        if (fh_consumer_takes (self->consumers[self->matches[i]], msg))
            self->matches[kept++] = self->matches[i];
    return kept;
}

/* A well-formed message no consumer takes: counted, its waiter told. */
static void
s_unrouted (fh_enqueuer_t *self, const fh_inject_t *inject)
{
    fh_bump (&self->unrouted);
    if (inject) {
        fh_emit_routed (inject->emit, 0);
        fh_emit_abandon (inject->emit);
    }
}

/* Checks, numbers and hands out one message read (got). With an
   injection, reports to its waiter, and only its consumer gets it when it
   names one. */
static void
s_route (fh_enqueuer_t *self, const s_read_t *got, const fh_inject_t *inject)
{
    zmq_msg_t *frames = got->frames;
    size_t count = got->count;
    /* The topic, asked of libzmq once: the check, the gaps and the match
       read it. */
    const char *topic = count ? zmq_msg_data (&frames[0]) : NULL;
    size_t topic_size = count ? zmq_msg_size (&frames[0]) : 0;
    fh_malformed_reason_t reason = fh_bus_check (got->seen, got->bytes, topic, topic_size,
                                                 self->config->max_frames,
                                                 self->config->max_message_bytes);
    if (reason != FH_MALFORMED_REASONS) {
        s_drop_malformed (self, reason, frames, count, got->seen, got->bytes, inject);
        return;
    }

    if (atomic_load_explicit (&self->sig_next, memory_order_relaxed))
        fh_enq_signatures_take (self);
    if (self->verifier && !inject && fh_enq_signature_refused (self, frames)) {
        for (size_t i = 0; i < count; i++)
            zmq_msg_close (&frames[i]);
        return;
    }

    /* Well-formed: it gets a number and a time whether or not it routes. */
    if (self->gaps && !inject)
        fh_gaps_check (self->gaps, topic, topic_size, zmq_msg_data (&frames[1]),
                       zmq_msg_size (&frames[1]));
    uint64_t seq = ++self->seq;
    /* CLOCK_MONOTONIC, not a coarse clock: the receive time starts the
       queue-wait and end-to-end latencies, measured to the microsecond
       (see fh_cons_now, the consumer's one reading per message). */
    int64_t received_ns = fh_clock_mono_ns ();
    bool only = inject && inject->only;
    size_t matched = only ? s_match_target (self, inject)
                          : fh_trigger_match (self->trigger, topic, topic_size, self->matches);
    if (matched == 0) {
        for (size_t i = 0; i < count; i++)
            zmq_msg_close (&frames[i]);
        s_unrouted (self, inject);
        return;
    }
    if (!self->shell) {
        /* Out of memory (read without a shell): every matching consumer
           loses it, and counts it. */
        for (size_t i = 0; i < count; i++)
            zmq_msg_close (&frames[i]);
        for (size_t i = 0; i < matched; i++)
            fh_consumer_count_drop (self->consumers[self->matches[i]], NULL);
        fh_oom_note ("a bus message's copy; dropped, counted by its consumers");
        if (inject) {
            fh_emit_routed (inject->emit, (int) matched);
            fh_emit_abandon (inject->emit);
        }
        return;
    }
    /* Well-formed, so every frame seen was kept: bytes is theirs. The
       shell is the message now; the next is read into a shell of its own. */
    fh_msg_t *msg = fh_msg_fill (self->shell, (uint32_t) count, got->bytes, seq, received_ns);
    self->shell = fh_msg_shell (self->shell_room);
    /* shard: consumers that take only their share of the keys (a replay
       to one consumer is its whatever the share). */
    if (!only)
        matched = s_keep_shares (self, msg, matched);
    if (matched == 0) {
        fh_msg_destroy (&msg);
        s_unrouted (self, inject);
        return;
    }
    if (inject)
        msg->emit = inject->emit;
    s_hand_out (self, msg, matched, inject != NULL);
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
    if (!fh_enq_recv_now (pull, &header))
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
    zmq_msg_t *frames = got.frames;
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
                              ZMQ_DONTWAIT | (i + 1 < count ? ZMQ_SNDMORE : 0))
                < 0)
                zmq_msg_close (&copy);
        }
    s_route (self, &got, &inject);
    fh_enq_signal_all (self);
}

/* The actor's loop: the pipe, the bus, injections and monitor events,
   until $TERM. After a failed start only the pipe is polled. */
static void
s_loop (fh_enqueuer_t *self, zsock_t *pipe, const fh_enq_bus_t *bus, zsock_t *inject)
{
    void *sub_handle = zsock_resolve (bus->sub);
    self->sub_handle = sub_handle;
    self->pipe = pipe;
    self->pipe_handle = zsock_resolve (pipe);
    zmq_pollitem_t items[] = {
        {zsock_resolve (pipe), 0, ZMQ_POLLIN, 0},
        {sub_handle, 0, ZMQ_POLLIN, 0},
        {inject ? zsock_resolve (inject) : NULL, 0, ZMQ_POLLIN, 0},
        {bus->monitor ? zsock_resolve (bus->monitor) : NULL, 0, ZMQ_POLLIN, 0},
    };
    int item_count = self->start_error[0] ? 1 : bus->monitor ? 4 : 3;
    bool running = true;
    while (running) {
        /* The endpoint warnings and reconnections due set the timeout;
           the loop turns at least once a second, so that its beat says
           it is alive when idle (health.h). */
        int64_t now = fh_clock_mono_ns ();
        atomic_store_explicit (&self->beat_ns, now, memory_order_relaxed);
        long timeout = item_count > 1 ? fh_enq_watch_tick (self, now) : -1;
        if (item_count > 1)
            fh_enq_signatures_tick (self);
        if (timeout < 0 || timeout > BEAT_MS)
            timeout = BEAT_MS;
        if (self->wake_held_since && timeout > WAKE_HOLD_POLL_MS)
            timeout = WAKE_HOLD_POLL_MS;
        if (zmq_poll (items, item_count, timeout) < 0) {
            if (zmq_errno () == EINTR)
                continue;
            break; /* ETERM: the context is going away */
        }
        if (items[0].revents & ZMQ_POLLIN)
            running = s_handle_pipe (self);
        int batch = 0;
        if (running && item_count > 1 && (items[1].revents & ZMQ_POLLIN))
            while (batch < BATCH_MAX && !self->terminating && s_receive_one (self, sub_handle))
                batch++;
        s_wake_offered (self, self->terminating ? 0 : batch);
        if (self->terminating)
            running = false;
        if (running && item_count > 2 && (items[2].revents & ZMQ_POLLIN))
            s_receive_injected (self, zsock_resolve (inject));
        if (running && item_count > 3 && (items[3].revents & ZMQ_POLLIN))
            for (int i = 0;
                 i < BATCH_MAX && fh_enq_monitor_event (self, zsock_resolve (bus->monitor)); i++)
                ;
    }
}

/* Injections still queued at the end were never routed: tells their
   waiters so. */
static void
s_drop_injections (zsock_t *inject)
{
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
            fh_emit_acquire (lost.emit); /* as s_receive_injected does */
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
}

static void
s_enqueuer_actor (zsock_t *pipe, void *args)
{
    fh_enqueuer_t *self = args;
    fh_thread_name_self ("fh:enq");
    /* Receive each message into a buffer of its own size. By default
       libzmq decodes into shared 8 KiB buffers that messages reference:
       cheap while messages come and go, but a queued message then pins its
       whole buffer and its share of a large per-buffer header, and a
       backlog of 1 KiB bodies took 1.9x their size in RSS. A socket reads
       the option when it is created. */
    zmq_ctx_set (zsys_init (), ZMQ_ZERO_COPY_RECV, 0);
    fh_enq_bus_t bus;
    if (fh_enq_open_bus (self, &bus) != 0) {
        atomic_store_explicit (&self->setup_done, true, memory_order_release);
        zsock_signal (pipe, 0);
        zsock_wait (pipe);
        atomic_store_explicit (&self->finished, true, memory_order_release);
        return;
    }
    /* Injected messages (emit, replay) come from the control actor. */
    zsock_t *inject = zsock_new (ZMQ_PULL);
    snprintf (self->inject_endpoint, sizeof self->inject_endpoint, "inproc://fanhub-inject-%p",
              (void *) self);
    if (!self->start_error[0] && (!inject || zsock_bind (inject, "%s", self->inject_endpoint) != 0))
        snprintf (self->start_error, sizeof self->start_error,
                  "cannot bind the injection socket: %s", zmq_strerror (zmq_errno ()));
    /* The pipe hands over no memory ordering that TSan (or C11) sees. */
    atomic_store_explicit (&self->setup_done, true, memory_order_release);
    zsock_signal (pipe, 0);

    s_loop (self, pipe, &bus, inject);
    s_drop_injections (inject);
    zsock_destroy (&inject);
    fh_enq_close_bus (self, &bus);
    if (self->shell)
        fh_msg_shell_put (self->shell);
    self->shell = NULL;
    fh_msg_cache_drain (); /* this thread's cached messages */
    /* zactor_destroy waits for the actor through a pipe TSan cannot see. */
    atomic_store_explicit (&self->finished, true, memory_order_release);
}

fh_enqueuer_t *
fh_enqueuer_new (const fh_config_t *config, fh_trigger_t *trigger, fh_consumer_t **consumers,
                 size_t consumer_count, char *err, size_t errlen)
{
    fh_enqueuer_t *self = aligned_alloc (FH_CACHE_LINE, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    memset (self, 0, sizeof *self);
    fh_handled_init (&self->handled);
    self->max_peers = INT_MAX; /* until the bind endpoints' budget is known */
    atomic_init (&self->beat_ns, fh_clock_mono_ns ());
    self->config = config;
    self->trigger = trigger;
    self->consumers = consumers;
    self->consumer_count = consumer_count;
    self->shell_room = 2;
    self->frames = calloc (config->max_frames, sizeof *self->frames);
    self->matches = calloc (consumer_count ? consumer_count : 1, sizeof *self->matches);
    self->offered = calloc (consumer_count ? consumer_count : 1, sizeof *self->offered);
    self->offered_mark = calloc (consumer_count ? consumer_count : 1, sizeof *self->offered_mark);
    self->targets = calloc (consumer_count ? consumer_count : 1, sizeof *self->targets);
    self->peers = calloc (config->connect.count + config->bind.count + 1, sizeof *self->peers);
    self->bind_ports = calloc (config->bind.count + 1, sizeof *self->bind_ports);
    self->watch = fh_endpoint_watch_new ((const char *const *) config->connect.items,
                                         config->connect.count,
                                         (const char *const *) config->bind.items,
                                         config->bind.count, config->curve.secret_key_file != NULL,
                                         config->connect_warning_ms * 1000000, fh_clock_mono_ns ());
    bool gaps_ok = true;
    if (config->gaps.counter) {
        self->gaps
            = fh_gaps_new (config->gaps.counter, config->gaps.producer, config->gaps.max_producers);
        gaps_ok = self->gaps != NULL;
    }
    /* Numbering goes on after what the spools kept from the last run:
       within a run, a seq names one message (a plugin may key by it). */
    for (size_t i = 0; i < consumer_count; i++) {
        uint64_t kept = fh_consumer_spool_max_seq (consumers[i]);
        if (kept > self->seq)
            self->seq = kept;
    }
    if (fh_enq_signatures_open (self, err, errlen) < 0) {
        fh_enqueuer_destroy (&self);
        return NULL;
    }
    if (self->frames && self->matches && self->offered && self->offered_mark && self->targets
        && self->peers && self->bind_ports && self->watch && gaps_ok)
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
    fh_actor_join (&self->actor, &self->finished);
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
    fh_endpoint_watch_destroy (&self->watch);
    fh_gaps_destroy (&self->gaps);
    fh_enq_signatures_close (self);
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

int64_t
fh_enqueuer_beat_ns (fh_enqueuer_t *self)
{
    /* Stopped (the hub is stopping): nothing to watch any more. */
    if (atomic_load_explicit (&self->finished, memory_order_acquire))
        return fh_clock_mono_ns ();
    return atomic_load_explicit (&self->beat_ns, memory_order_relaxed);
}

const char *
fh_enqueuer_inject_endpoint (fh_enqueuer_t *self)
{
    return self->inject_endpoint;
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
    out->signatures = atomic_load (&self->sig_on);
    out->signatures_checked = atomic_load (&self->sig_checked);
    out->crl_next_update = atomic_load (&self->sig_crl_next);
    for (int i = 0; i < FH_SIG_REASONS; i++)
        out->signature_failed[i] = atomic_load (&self->sig_failed[i]);
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
