/*  control - the hub's control socket: commands in, answers out.

    A CZMQ actor with a ROUTER socket bound on the `control` endpoint. A
    request is one command frame (after the REQ envelope, if any); the
    answer is one frame. Commands:
      PING   -> "PONG"
      STATS  -> the JSON snapshot of docs/stats-schema.md
      METRICS -> the same figures as Prometheus text (docs/metrics.md)
      HEALTH -> "200 JSON" or "503 JSON": liveness (health.h)
      READY  -> "200 JSON" or "503 JSON": readiness (health.h)
      STATUS -> the status page's JSON: STATS with more (status.h)
      EMIT, wait|nowait, TIMEOUT_MS, topic, body[, frames]
             -> once routed (nowait) or handled or timed out (wait):
                {"matched": N, "handled": bool, "timed_out": bool,
                 "outcomes": {"consumer": "completed"|"failed"|...}}
      INJECT, consumer, topic, body[, frames]
             -> "OK" once in that consumer's queue (or spool), or an ERROR
      PAUSE, consumer / RESUME, consumer
             -> "OK paused 'x'" / "OK resumed 'x'" at once (fh_consumer_set_paused)
      RESTART, consumer
             -> once the main thread made the new instance (fh_hub_restart):
                "OK restarted ...", "DOWN restarted ...; not up: ..." or an ERROR
      RELOAD -> once done: "OK reloaded ...", "DOWN reloaded ...; not up: ..."
                (applied; a consumer it added or changed is down) or "ERROR ..."
    EMIT and INJECT past FH_CONTROL_INJECT_MAX waiting -> "ERROR busy: ..."
    at once. A request frame above bus.max_message_bytes (plus room for
    the command) is refused by ZeroMQ, which drops the connection.
    Anything else (unknown command, wrong arguments, a command word of more
    than FH_CONTROL_MAX_COMMAND bytes, an empty frame) is answered with a frame
    starting "ERROR " and a reason; the socket keeps serving.

    The actor also owns the metrics clock: once a second it lets the stats
    move their interval boundary, and it runs the periodic exporters.

    An ipc:// endpoint is created with mode 0660, under a umask, so there is
    no window before its mode is set (its directory, 0700, if missing); its
    path and directory are checked first (control_path.h). If another hub
    answers PING on it, the endpoint is refused rather than taken over. A
    client sends nothing to an ipc:// socket that is not its own user's or
    root's. A tcp:// endpoint with control_curve is a CURVE server, and a
    client of a tcp:// endpoint uses this process's keys and says at once
    when its handshake was refused (control_curve.h).
*/
#ifndef FH_CONTROL_H_INCLUDED
#define FH_CONTROL_H_INCLUDED

#include "hub.h"

#define FH_CONTROL_MAX_COMMAND 4096
/* EMIT and INJECT requests that wait for the enqueuer (it may be blocked
   by a full `block` consumer), and requests waiting for an answer (emit
   --wait): past these a new one is answered "ERROR busy: ..." at once. */
#define FH_CONTROL_INJECT_MAX 1000
/* Answers the control socket keeps for one client that does not read
   them; past it an answer is not sent, counted (hub.control_unanswered, fh_hub_control_unanswered). */
#define FH_CONTROL_ANSWERS_MAX 200000
#define FH_CONTROL_PENDING_MAX 10000
/* A control request frame may be this much above bus.max_message_bytes. */
#define FH_CONTROL_REQUEST_SLACK 65536

typedef struct fh_control fh_control_t;

/* Binds and starts serving. NULL with one line in err when it cannot. */
fh_control_t *fh_control_new (fh_hub_t *hub, char *err, size_t errlen);
/* Stops serving, removes an ipc socket file. Safe with NULL and twice. */
void fh_control_destroy (fh_control_t **self_p);

/* A client's request: connects to endpoint, sends command, waits at most
   timeout_ms. Returns the answer (malloc'd, NUL-terminated) or NULL with
   one line in err. */
char *fh_control_call (const char *endpoint, const char *command, int timeout_ms, char *err,
                       size_t errlen);

/* The same with a request of several frames. */
char *fh_control_call_frames (const char *endpoint, const fanhub_bytes_t *frames, size_t count,
                              int timeout_ms, char *err, size_t errlen);

#endif
