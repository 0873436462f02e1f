/*  control - the hub's control socket. See control.h. */
#include "control.h"

#include "actor.h"
#include "clock.h"
#include "fs.h"
#include "log.h"
#include "control_commands.h"
#include "control_curve.h"
#include "control_parse.h"
#include "control_path.h"
#include "control_tick.h"
#include "emit.h"
#include "enqueuer.h"
#include "health.h"
#include "oom.h"
#include "stats.h"
#include "stats_format.h"
#include "thread.h"

#include <czmq.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_ENVELOPE_FRAMES 16 /* ROUTER identity, delimiter, proxies */
#define MAX_REQUEST_FRAMES 64  /* command, arguments, message frames */

struct fh_control {
    fh_hub_t *hub;
    zactor_t *actor;
    char *ipc_path; /* to remove at the end, when ipc:// */
    char start_error[512];
    atomic_bool setup_done; /* release: start_error is final */
    atomic_bool bound;      /* the endpoint is ours: remove an ipc file */
    atomic_bool finished;   /* release: the actor's threads (ZAP) are joined */
};

/* A request answered later: an emit or an injection, waiting for the
   enqueuer to route it, or (emit --wait) for every consumer to finish. */
typedef enum { PENDING_EMIT, PENDING_EMIT_WAIT, PENDING_INJECT, PENDING_RELOAD } s_pending_kind_t;

typedef struct {
    s_pending_kind_t kind;
    zmq_msg_t envelope[MAX_ENVELOPE_FRAMES];
    size_t envelope_count;
    fh_emit_t *emit;
    char *consumer; /* PENDING_INJECT: the consumer's name */
    size_t only;    /* PENDING_RELOAD: the attempt that answers it */
    bool restart;   /* PENDING_RELOAD: ... of a restart (fh_hub_restart_result) */
    int64_t deadline_ns;
} s_pending_t;

typedef struct {
    fh_control_t *control;
    fh_stats_t *stats;
    fh_tick_t *tick; /* the exporters, once a second (control_tick.h) */
    void *inject;    /* PUSH to the enqueuer */
    s_pending_t *pending;
    size_t pending_count, pending_room;
    /* The actor's own, made at its start. */
    fh_control_guard_t *guard; /* the ROUTER; with control_curve its keys, ZAP */
    void *router;
    zsock_t *inject_sock;
    uint64_t generation; /* the hub's, at the last turn */
} s_state_t;

/* Answers that could not be sent (the client's pipe was full: it sends
   and does not read; or it is gone) are counted in the hub's
   control_unanswered. */
static void
s_reply (s_state_t *state, zmq_msg_t *envelope, size_t envelope_count, const char *text)
{
    void *router = state->router;
    /* ROUTER_MANDATORY: a reply that cannot go is refused here, counted
       and logged, never dropped silently; DONTWAIT: never blocks. The
       caller closes what was not sent. */
    int rc = 0;
    for (size_t i = 0; i < envelope_count && rc >= 0; i++)
        rc = zmq_msg_send (&envelope[i], router, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0 && zmq_send (router, text, strlen (text), ZMQ_DONTWAIT) >= 0)
        return;
    int error = zmq_errno ();
    uint64_t lost = atomic_fetch_add (fh_hub_control_unanswered (state->control->hub), 1);
    if (error == EAGAIN && (lost == 0 || (lost & (lost + 1)) == 0)) /* 1, 2, 4, ... */
        fh_warning ("control: a client that does not read its answers has %d waiting: an "
                    "answer is not sent (%llu so far, hub.control_unanswered)",
                    FH_CONTROL_ANSWERS_MAX, (unsigned long long) lost + 1);
}

/* A new pending answer, kept with the request's envelope; NULL when out
   of memory. */
static s_pending_t *
s_pending_add (s_state_t *state, s_pending_kind_t kind, zmq_msg_t *envelope, size_t envelope_count,
               int64_t timeout_ms)
{
    if (state->pending_count == state->pending_room) {
        size_t room = state->pending_room ? state->pending_room * 2 : 8;
        s_pending_t *grown = realloc (state->pending, room * sizeof *grown);
        if (!grown)
            return NULL;
        state->pending = grown;
        state->pending_room = room;
    }
    s_pending_t *pending = &state->pending[state->pending_count++];
    *pending = (s_pending_t){.kind = kind, .envelope_count = envelope_count};
    pending->deadline_ns = fh_clock_mono_ns () + timeout_ms * 1000000;
    for (size_t i = 0; i < envelope_count; i++) {
        zmq_msg_init (&pending->envelope[i]);
        zmq_msg_copy (&pending->envelope[i], &envelope[i]);
    }
    return pending;
}

/* Bounded: while the enqueuer is blocked (a full `block` consumer) it
   takes no injection; more are refused at once, never queued. Fills busy
   and returns true when this one is refused. */
static bool
s_inject_refused (s_state_t *state, char *busy, size_t size)
{
    size_t unrouted = 0, waiting = 0;
    for (size_t i = 0; i < state->pending_count; i++)
        if (state->pending[i].emit) {
            waiting++;
            unrouted += fh_emit_matched (state->pending[i].emit) == -2;
        }
    if (unrouted < FH_CONTROL_INJECT_MAX && waiting < FH_CONTROL_PENDING_MAX)
        return false;
    snprintf (busy, size,
              "ERROR busy: %zu messages wait for the enqueuer, %zu answers are "
              "pending; try again later",
              unrouted, waiting);
    return true;
}

/* An answer that could not be made for want of memory: counted, and the
   client told. */
static const char *
s_or_oom (const char *text)
{
    if (text)
        return text;
    fh_oom_note ("a control answer; the client gets ERROR out of memory");
    return "ERROR out of memory";
}

/* Sends [header, frames...] to the enqueuer; NULL, or why not. The bound
   of s_inject_refused keeps the pipe below its high-water mark; should it
   be full all the same, the answer is busy, not a wait. The rest of a
   multipart message follows its first frame whatever the mark. */
static const char *
s_inject_send (s_state_t *state, fh_emit_t *emit, const char *consumer, zmq_msg_t *frames,
               size_t count)
{
    if (consumer && fh_emit_set_target (emit, consumer) != 0)
        return s_or_oom (NULL);
    fh_inject_t header = {emit, consumer != NULL, false};
    if (zmq_send (state->inject, &header, sizeof header, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return "ERROR busy: the enqueuer takes no more messages now; try again later";
    for (size_t i = 0; i < count; i++) {
        zmq_msg_t copy;
        zmq_msg_init (&copy);
        zmq_msg_copy (&copy, &frames[i]);
        zmq_msg_send (&copy, state->inject, i + 1 < count ? ZMQ_SNDMORE : 0);
    }
    return NULL;
}

/* Hands a message to the enqueuer with a waiter; the request is answered
   from s_serve_pending. frames[0..count-1] are topic, body, more; only is
   the index of the one consumer it goes to, or -1. */
static void
s_inject (s_state_t *state, zmq_msg_t *envelope, size_t envelope_count, zmq_msg_t *frames,
          size_t count, s_pending_kind_t kind, int64_t only, int64_t timeout_ms)
{
    fh_hub_t *hub = state->control->hub;
    char busy[160];
    if (s_inject_refused (state, busy, sizeof busy)) {
        s_reply (state, envelope, envelope_count, busy);
        return;
    }
    /* By name: the enqueuer finds it in its table of when it routes. */
    char *consumer = only >= 0 ? strdup (fh_consumer_name (fh_hub_consumer (hub, (size_t) only)))
                               : NULL;
    fh_emit_t *emit = fh_emit_new (fh_hub_consumer_count (hub));
    s_pending_t *pending = (only < 0 || consumer) && emit
                               ? s_pending_add (state, kind, envelope, envelope_count, timeout_ms)
                               : NULL;
    const char *error = pending ? s_inject_send (state, emit, consumer, frames, count)
                                : s_or_oom (NULL);
    if (error) {
        if (pending) { /* the last one: taken back */
            for (size_t i = 0; i < pending->envelope_count; i++)
                zmq_msg_close (&pending->envelope[i]);
            state->pending_count--;
        }
        /* Never handed over: both references go, ours and the message's. */
        fh_emit_t *message_ref = emit;
        fh_emit_unref (&message_ref);
        fh_emit_unref (&emit);
        free (consumer);
        s_reply (state, envelope, envelope_count, error);
        return;
    }
    pending->emit = emit;
    pending->consumer = consumer;
}

/* Queues a RELOAD request (restart 0) or a RESTART (the number of the
   restart asked): the main thread does it (it owns the hub's lifecycle),
   asked by SIGHUP or SIGUSR1, and the answer waits for it. */
static void
s_request_reload (s_state_t *state, zmq_msg_t *envelope, size_t envelope_count, uint64_t restart)
{
    s_pending_t *pending
        = s_pending_add (state, PENDING_RELOAD, envelope, envelope_count, 60 * INT64_C (1000));
    if (!pending) {
        s_reply (state, envelope, envelope_count, s_or_oom (NULL));
        return;
    }
    /* Answered by the first attempt that starts after now: one under way
       read the file before this request, maybe before it was written. */
    pending->only = restart ? restart : (size_t) fh_hub_reloads_started (state->control->hub) + 1;
    pending->restart = restart != 0;
    kill (getpid (), restart ? SIGUSR1 : SIGHUP);
}

/* One request: frames[0] is the command word, then its arguments; the
   words and their arguments are checked by fh_control_parse (fuzzed). */
static void
s_dispatch (s_state_t *state, zmq_msg_t *envelope, size_t envelope_count, zmq_msg_t *frames,
            size_t count)
{
    fh_hub_t *hub = state->control->hub;
    char reply[512];
    fanhub_bytes_t args[MAX_REQUEST_FRAMES];
    for (size_t i = 0; i < count && i < MAX_REQUEST_FRAMES; i++)
        args[i] = (fanhub_bytes_t){zmq_msg_data (&frames[i]), zmq_msg_size (&frames[i])};
    fh_control_request_t request;
    if (fh_control_parse (args, count < MAX_REQUEST_FRAMES ? count : MAX_REQUEST_FRAMES, &request,
                          reply, sizeof reply)
        != 0) {
        s_reply (state, envelope, envelope_count, reply);
        return;
    }
    switch (request.kind) {
    case FH_CONTROL_PING: s_reply (state, envelope, envelope_count, "PONG"); return;
    case FH_CONTROL_STATS:
    case FH_CONTROL_METRICS: {
        fh_metrics_snapshot_t *snapshot = fh_stats_snapshot (state->stats);
        char *text = NULL;
        if (snapshot && request.kind == FH_CONTROL_METRICS)
            text = fh_metrics_prometheus (snapshot);
        else if (snapshot) {
            json_t *stats = fh_metrics_to_json (snapshot);
            text = stats ? json_dumps (stats, JSON_COMPACT) : NULL;
            json_decref (stats);
        }
        fh_metrics_snapshot_destroy (&snapshot);
        s_reply (state, envelope, envelope_count, s_or_oom (text));
        free (text);
        return;
    }
    case FH_CONTROL_HEALTH:
    case FH_CONTROL_READY:
    case FH_CONTROL_STATUS: {
        fh_metrics_snapshot_t *snapshot = fh_stats_snapshot (state->stats);
        char *text = !snapshot ? NULL
                     : request.kind == FH_CONTROL_STATUS
                         ? fh_status_answer (fh_tick_status (state->tick), hub, snapshot,
                                             fh_clock_mono_ns ())
                         : fh_health_answer (snapshot, fh_hub_config (hub),
                                             fh_hub_enqueuer_age_ns (hub),
                                             request.kind == FH_CONTROL_READY);
        fh_metrics_snapshot_destroy (&snapshot);
        s_reply (state, envelope, envelope_count, s_or_oom (text));
        free (text);
        return;
    }
    case FH_CONTROL_RELOAD: s_request_reload (state, envelope, envelope_count, 0); return;
    case FH_CONTROL_EMIT:
        s_inject (state, envelope, envelope_count, frames + request.message,
                  count - request.message, request.wait ? PENDING_EMIT_WAIT : PENDING_EMIT, -1,
                  request.wait ? request.timeout_ms : FH_CONTROL_TIMEOUT_MAX_MS);
        return;
    case FH_CONTROL_INJECT: {
        size_t index = fh_control_consumer_find (hub, args[request.consumer], reply, sizeof reply);
        if (index == SIZE_MAX) {
            s_reply (state, envelope, envelope_count, reply);
            return;
        }
        s_inject (state, envelope, envelope_count, frames + request.message,
                  count - request.message, PENDING_INJECT, (int64_t) index,
                  FH_CONTROL_TIMEOUT_MAX_MS);
        return;
    }
    case FH_CONTROL_PAUSE:
    case FH_CONTROL_RESUME:
        fh_control_pause (hub, args[request.consumer], request.kind == FH_CONTROL_PAUSE, reply,
                          sizeof reply);
        s_reply (state, envelope, envelope_count, reply);
        return;
    case FH_CONTROL_RESTART: {
        uint64_t ticket = fh_control_restart_ask (hub, args[request.consumer], reply, sizeof reply);
        if (ticket)
            s_request_reload (state, envelope, envelope_count, ticket);
        else
            s_reply (state, envelope, envelope_count, reply);
        return;
    }
    }
}

/* Reads one request off the ROUTER and answers it (or queues the answer).
   The envelope is every frame up to and including an empty delimiter (REQ
   clients), or just the identity (DEALER clients). */
static void
s_serve_one (s_state_t *state, void *router)
{
    enum { CAP = MAX_ENVELOPE_FRAMES + MAX_REQUEST_FRAMES };
    zmq_msg_t frames[CAP], overflow;
    size_t count = 0;
    bool more = true, too_many = false;
    while (more) {
        zmq_msg_t *frame = count < CAP ? &frames[count] : &overflow;
        zmq_msg_init (frame);
        if (zmq_msg_recv (frame, router, count == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close (frame);
            break;
        }
        more = zmq_msg_more (frame);
        if (count < CAP)
            count++;
        else {
            too_many = true;
            zmq_msg_close (frame);
        }
    }
    if (count == 0)
        return;
    size_t body = 1;
    for (size_t i = 1; i < count && i < MAX_ENVELOPE_FRAMES; i++)
        if (zmq_msg_size (&frames[i]) == 0) {
            body = i + 1;
            break;
        }
    if (too_many)
        s_reply (state, frames, body, "ERROR too many frames in one request");
    else
        s_dispatch (state, frames, body, frames + body, count - body);
    for (size_t i = 0; i < count; i++)
        zmq_msg_close (&frames[i]);
}

/* The answer of a routed (or finished, or timed-out) request. */
static void
s_answer_pending (s_state_t *state, s_pending_t *pending, bool timed_out)
{
    int matched = fh_emit_matched (pending->emit);
    char line[256];
    if (matched == -1) {
        s_reply (state, pending->envelope, pending->envelope_count,
                 "ERROR malformed message (see the hub's limits: bus.max_frames, "
                 "bus.max_message_bytes, a UTF-8 topic, a body frame)");
        return;
    }
    if (pending->kind == PENDING_INJECT) {
        fh_outcome_t outcome = fh_emit_outcome (pending->emit, pending->consumer);
        if (matched == 0) /* a reload removed it before the enqueuer routed this */
            snprintf (line, sizeof line,
                      "ERROR consumer '%s' left the hub before the message "
                      "reached it",
                      pending->consumer);
        else
            snprintf (line, sizeof line, "%s",
                      outcome == FH_OUTCOME_DROPPED ? "ERROR the consumer's queue is full"
                      : matched < 0                 ? "ERROR not routed"
                                                    : "OK");
        s_reply (state, pending->envelope, pending->envelope_count, line);
        return;
    }
    char *text = fh_control_emit_answer (pending->emit, matched, timed_out);
    s_reply (state, pending->envelope, pending->envelope_count, s_or_oom (text));
    free (text);
}

/* Answers the pending requests that are ready; keeps the others. */
static void
s_serve_pending (s_state_t *state)
{
    int64_t now = fh_clock_mono_ns ();
    size_t kept = 0;
    for (size_t i = 0; i < state->pending_count; i++) {
        s_pending_t *pending = &state->pending[i];
        if (pending->kind == PENDING_RELOAD) {
            char result[512];
            uint64_t attempts
                = pending->restart
                      ? fh_hub_restart_result (state->control->hub, result, sizeof result)
                      : fh_hub_reload_result (state->control->hub, result, sizeof result);
            if (attempts < pending->only && now < pending->deadline_ns) {
                state->pending[kept++] = *pending;
                continue;
            }
            s_reply (state, pending->envelope, pending->envelope_count,
                     attempts < pending->only ? "ERROR it did not finish in 60 s" : result);
            for (size_t e = 0; e < pending->envelope_count; e++)
                zmq_msg_close (&pending->envelope[e]);
            continue;
        }
        bool routed = fh_emit_matched (pending->emit) != -2;
        bool ready = pending->kind == PENDING_EMIT_WAIT
                         ? fh_emit_is_handled (pending->emit)
                               || (routed && fh_emit_matched (pending->emit) <= 0)
                         : routed;
        bool timed_out = !ready && now >= pending->deadline_ns;
        if (!ready && !timed_out) {
            state->pending[kept++] = *pending;
            continue;
        }
        s_answer_pending (state, pending, timed_out);
        for (size_t e = 0; e < pending->envelope_count; e++)
            zmq_msg_close (&pending->envelope[e]);
        fh_emit_unref (&pending->emit);
        free (pending->consumer);
    }
    state->pending_count = kept;
}

/* A request carries at most one bus message: a bigger frame is refused
   while it arrives (ZeroMQ drops that connection), not received whole
   first. Room for the answers of a long pipeline (a client that sent
   100,000 EMITs before reading got 4,704 answers at the default 1,000);
   past it an answer is refused and counted (s_reply). */
static void
s_router_bounds (void *router, const fh_config_t *config)
{
    int64_t max_request = (int64_t) config->max_message_bytes + FH_CONTROL_REQUEST_SLACK;
    zmq_setsockopt (router, ZMQ_MAXMSGSIZE, &max_request, sizeof max_request);
    int answers = FH_CONTROL_ANSWERS_MAX, one = 1;
    zmq_setsockopt (router, ZMQ_SNDHWM, &answers, sizeof answers);
    zmq_setsockopt (router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
}

/* The actor's start: the ROUTER bound, the PUSH to the enqueuer, the
   exporters. Sets start_error when the hub cannot have its control
   socket. */
static void
s_setup (s_state_t *state)
{
    fh_control_t *self = state->control;
    const fh_config_t *config = fh_hub_config (self->hub);
    state->stats = fh_stats_new (self->hub);
    if (state->stats)
        state->guard = fh_control_guard_new (config, fh_hub_control_denied (self->hub),
                                             fh_hub_control_refused (self->hub), self->start_error,
                                             sizeof self->start_error);
    state->router = state->guard ? fh_control_guard_router (state->guard) : NULL;
    if (!state->stats && !self->start_error[0]) {
        snprintf (self->start_error, sizeof self->start_error, "control: out of memory");
        return;
    }
    if (!state->router)
        return;
    s_router_bounds (state->router, config);
    if (fh_control_path_bind (state->router, config->control) != 0) {
        snprintf (self->start_error, sizeof self->start_error, "control: cannot bind %s: %s",
                  config->control, zmq_strerror (zmq_errno ()));
        return;
    }
    atomic_store_explicit (&self->bound, true, memory_order_relaxed);
    zsock_t *inject = state->inject_sock = zsock_new (ZMQ_PUSH);
    if (inject)
        zsock_set_sndhwm (inject, 2 * FH_CONTROL_INJECT_MAX);
    if (!inject || zsock_connect (inject, "%s", fh_hub_inject_endpoint (self->hub)) != 0)
        snprintf (self->start_error, sizeof self->start_error,
                  "control: cannot reach the enqueuer: %s", zmq_strerror (zmq_errno ()));
    else
        state->inject = zsock_resolve (inject);
    state->tick = fh_tick_new (self->hub, self->start_error, sizeof self->start_error);
}

static void
s_teardown (s_state_t *state)
{
    for (size_t i = 0; i < state->pending_count; i++) {
        for (size_t e = 0; e < state->pending[i].envelope_count; e++)
            zmq_msg_close (&state->pending[i].envelope[e]);
        fh_emit_unref (&state->pending[i].emit);
        free (state->pending[i].consumer);
    }
    free (state->pending);
    zsock_destroy (&state->inject_sock);
    fh_tick_destroy (&state->tick);
    fh_control_guard_destroy (&state->guard);
    fh_stats_destroy (&state->stats);
}

/* Under the hub's lock: after a reload, the figures and the exporters
   start over with the new consumers. */
static void
s_follow_reload (s_state_t *state)
{
    fh_hub_t *hub = state->control->hub;
    if (fh_hub_generation (hub) == state->generation)
        return;
    state->generation = fh_hub_generation (hub);
    fh_stats_destroy (&state->stats);
    state->stats = fh_stats_new (hub);
    if (state->tick)
        fh_tick_follow_reload (state->tick, hub);
}

/* One turn after a poll: requests, monitor events, pending answers and
   the tick, which reads the hub under its lock; I/O to the exporters
   after. */
static void
s_turn (s_state_t *state, const zmq_pollitem_t *items, int item_count, int64_t *next_tick)
{
    fh_hub_t *hub = state->control->hub;
    /* A request or the tick may take a snapshot: the process figures are
       read from /proc now, since the hub's lock does no I/O. */
    int64_t now = fh_clock_mono_ns ();
    bool tick_due = now >= *next_tick && state->stats && state->tick;
    fh_process_t process;
    bool read_process = tick_due || (item_count > 1 && (items[1].revents & ZMQ_POLLIN));
    if (read_process)
        fh_process_read (&process);
    /* The consumer list and configuration may change under a reload:
       read them under the hub's lock, and start over after one. */
    fh_hub_lock (hub);
    s_follow_reload (state);
    if (read_process && state->stats)
        fh_stats_set_process (state->stats, &process);
    if (item_count > 1 && (items[1].revents & ZMQ_POLLIN))
        s_serve_one (state, state->router);
    if (item_count > 2 && (items[2].revents & ZMQ_POLLIN))
        fh_control_guard_on_monitor (state->guard);
    if (state->pending_count)
        s_serve_pending (state);
    if (tick_due && state->stats) {
        fh_tick_make (state->tick, hub, state->stats, now);
        *next_tick = now + FH_TICK_MS * INT64_C (1000000);
    }
    fh_hub_unlock (hub);
    if (state->tick)
        fh_tick_send (state->tick);
}

static void
s_control_actor (zsock_t *pipe, void *args)
{
    fh_control_t *self = args;
    fh_thread_name_self ("fh:control");
    s_state_t state = {.control = self};
    s_setup (&state);
    /* The pipe hands over no memory ordering that TSan (or C11) sees. */
    atomic_store_explicit (&self->setup_done, true, memory_order_release);
    zsock_signal (pipe, 0);

    void *monitor = state.guard ? fh_control_guard_monitor (state.guard) : NULL;
    zmq_pollitem_t items[] = {
        {zsock_resolve (pipe), 0, ZMQ_POLLIN, 0},
        {state.router, 0, ZMQ_POLLIN, 0},
        {monitor, 0, ZMQ_POLLIN, 0},
    };
    int item_count = self->start_error[0] ? 1 : monitor ? 3 : 2;
    int64_t next_tick = fh_clock_mono_ns () + FH_TICK_MS * INT64_C (1000000);
    fh_hub_lock (self->hub); /* a reload may already have come */
    state.generation = fh_hub_generation (self->hub);
    fh_hub_unlock (self->hub);
    while (true) {
        int64_t wait_ms = (next_tick - fh_clock_mono_ns ()) / 1000000;
        if (state.pending_count && wait_ms > 5)
            wait_ms = 5; /* injections waiting for the enqueuer or consumers */
        if (zmq_poll (items, item_count, wait_ms < 0 ? 0 : (long) wait_ms) < 0) {
            if (zmq_errno () == EINTR)
                continue;
            break;
        }
        if (items[0].revents & ZMQ_POLLIN) {
            char *command = zstr_recv (pipe);
            bool term = !command || streq (command, "$TERM");
            zstr_free (&command);
            if (term)
                break;
        }
        s_turn (&state, items, item_count, &next_tick);
    }
    s_teardown (&state);
    /* The pipe orders nothing TSan sees: what the ZAP thread read of the
       configuration is done before the caller frees it. */
    atomic_store_explicit (&self->finished, true, memory_order_release);
}

/* True when a hub listens on PATH.busy: one whose clients fill its
   budget hides its socket there (control_curve.c) and takes it back. */
static bool
s_hidden_hub_listens (const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int n = snprintf (addr.sun_path, sizeof addr.sun_path, "%s.busy", path);
    struct stat st;
    if (n < 0 || (size_t) n >= sizeof addr.sun_path || lstat (addr.sun_path, &st) != 0
        || !S_ISSOCK (st.st_mode))
        return false;
    int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    /* Refused or gone: nobody listens (a hub that died). A full backlog
       (EAGAIN) is a hub. */
    bool listens
        = fd >= 0 && (connect (fd, (struct sockaddr *) &addr, sizeof addr) == 0 || errno == EAGAIN);
    if (fd >= 0)
        close (fd);
    return listens;
}

/* For ipc://: checks the path and its directory (control_path), and
   refuses a path another hub serves, hidden or not. */
static int
s_prepare_ipc (fh_control_t *self, const char *endpoint, char *err, size_t errlen)
{
    const char *path = endpoint + strlen ("ipc://");
    bool stale = false;
    if (fh_control_path_prepare (path, &stale, err, errlen) != 0)
        return -1;
    if (s_hidden_hub_listens (path)) {
        snprintf (err, errlen,
                  "control: %s is served by another running hub (renamed %s.busy while its "
                  "clients fill its budget); give this one another `control:` (or a `name:`)",
                  endpoint, path);
        return -1;
    }
    if (stale) {
        char why[256];
        char *answer = fh_control_call (endpoint, "PING", 300, why, sizeof why);
        bool taken = answer && strcmp (answer, "PONG") == 0;
        free (answer);
        if (taken) {
            snprintf (err, errlen,
                      "control: %s is served by another running hub; give this one "
                      "another `control:` (or a `name:`)",
                      endpoint);
            return -1;
        }
    }
    self->ipc_path = strdup (path);
    if (!self->ipc_path) {
        snprintf (err, errlen, "control: out of memory");
        return -1;
    }
    return 0;
}

fh_control_t *
fh_control_new (fh_hub_t *hub, char *err, size_t errlen)
{
    fh_control_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "control: out of memory");
        return NULL;
    }
    self->hub = hub;
    const char *endpoint = fh_hub_config (hub)->control;
    if (strncmp (endpoint, "ipc://", 6) == 0 && s_prepare_ipc (self, endpoint, err, errlen)) {
        fh_control_destroy (&self);
        return NULL;
    }
    self->actor = zactor_new (s_control_actor, self);
    if (self->actor)
        (void) atomic_load_explicit (&self->setup_done, memory_order_acquire);
    if (!self->actor || self->start_error[0]) {
        snprintf (err, errlen, "%s", self->actor ? self->start_error : "control: out of memory");
        if (!atomic_load (&self->bound)) {
            free (self->ipc_path); /* the bind failed: the file is not ours */
            self->ipc_path = NULL;
        }
        fh_control_destroy (&self);
        return NULL;
    }
    return self;
}

void
fh_control_destroy (fh_control_t **self_p)
{
    fh_control_t *self = *self_p;
    if (!self)
        return;
    fh_actor_join (&self->actor, &self->finished);
    if (self->ipc_path)
        unlink (self->ipc_path);
    free (self->ipc_path);
    free (self);
    *self_p = NULL;
}
