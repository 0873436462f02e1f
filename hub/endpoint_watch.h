/*  endpoint_watch - what each bus endpoint is doing, from the SUB socket's
    monitor events, and what the operator hears about it.

    Per endpoint: connected or not, since when, the last cause ZeroMQ gave
    (the name did not resolve, the connection was refused, a handshake
    failed) and the handshakes that failed. A bus.connect endpoint that has
    not connected within bus.connect_warning gets a warning naming it and
    the cause, repeated with a doubling gap (at most 10 minutes) while it
    lasts; connecting is one info line, a disconnect another.

    A failed handshake on a bus.connect endpoint (a mechanism mismatch, a
    wrong server_public_key, a refusal by the publisher's ZAP) is logged
    once per streak and counted; libzmq gives up on the endpoint after a
    mismatch, and retries a closed handshake every 100 ms for ever, so the
    enqueuer disconnects it and connects again when
    fh_endpoint_watch_due says, with a doubling backoff (250 ms to 10 s).

    Events, the timer and the logging run on the enqueuer's thread; any
    thread may read a status (a mutex guards what is shared). Time is
    passed in (monotonic nanoseconds), so tests drive it.
*/
#ifndef FH_ENDPOINT_WATCH_H_INCLUDED
#define FH_ENDPOINT_WATCH_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fh_endpoint_watch fh_endpoint_watch_t;

#define FH_ENDPOINT_CAUSE_SIZE 200

typedef struct {
    bool connected;
    int64_t since_ns;                        /* monotonic time of the last change (or the start) */
    uint64_t handshake_failures;             /* handshakes on the endpoint that failed */
    char last_error[FH_ENDPOINT_CAUSE_SIZE]; /* "" when none yet */
    int port; /* a tcp bind endpoint: its port once bound ('*': as chosen); else 0 */
} fh_endpoint_status_t;

/* The endpoints connect[0..connect_count-1] then bind[0..bind_count-1];
   curve: bus.curve is on (it names a likely cause). NULL when out of
   memory. */
fh_endpoint_watch_t *fh_endpoint_watch_new (const char *const *connect, size_t connect_count,
                                            const char *const *bind, size_t bind_count, bool curve,
                                            int64_t warn_after_ns, int64_t now_ns);
void fh_endpoint_watch_destroy (fh_endpoint_watch_t **self_p);

/* A monitor event (ZMQ_EVENT_*, with its value) on endpoint i. True when
   the caller must disconnect the endpoint now: it is to be connected
   again when fh_endpoint_watch_due returns it. */
bool fh_endpoint_watch_event (fh_endpoint_watch_t *self, size_t i, int event, uint32_t value,
                              int64_t now_ns);
/* A bind endpoint's peers changed: connected while there is one. */
void fh_endpoint_watch_peers (fh_endpoint_watch_t *self, size_t i, int peers, int64_t now_ns);
/* Records a cause on endpoint i (a refused peer on a bind endpoint). */
void fh_endpoint_watch_note (fh_endpoint_watch_t *self, size_t i, const char *cause);
/* Writes the warnings due by now; returns an endpoint to connect again
   now (once), or SIZE_MAX when none is. Call until SIZE_MAX. */
size_t fh_endpoint_watch_due (fh_endpoint_watch_t *self, int64_t now_ns);
/* Milliseconds until something is due (0 when it is), or -1 when
   nothing is pending. */
long fh_endpoint_watch_timeout_ms (const fh_endpoint_watch_t *self, int64_t now_ns);
/* Endpoint i's status, for any thread. */
void fh_endpoint_watch_read (fh_endpoint_watch_t *self, size_t i, fh_endpoint_status_t *out);

#endif
