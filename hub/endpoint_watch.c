/*  endpoint_watch - the bus endpoints' state and their warnings. See
    endpoint_watch.h. */
#include "endpoint_watch.h"

#include "log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define S_NS_PER_S INT64_C (1000000000)
#define S_WARN_GAP_MAX (600 * S_NS_PER_S)         /* repeated warnings: at most this apart */
#define S_RETRY_FIRST (250 * (S_NS_PER_S / 1000)) /* after a failed handshake */
#define S_RETRY_MAX (10 * S_NS_PER_S)

typedef struct {
    const char *address;
    bool connect;        /* a bus.connect endpoint */
    bool up;             /* connect: handshake done; bind: a peer is there */
    bool opened;         /* a socket was opened since the last retry */
    bool failing;        /* a handshake failure streak was logged */
    bool warned;         /* a "not connected" warning went out since the last change */
    int64_t since_ns;    /* the last change of up */
    int64_t warn_at_ns;  /* the next "not connected" warning; 0 none */
    int64_t warn_gap_ns; /* and the one after is this much later */
    int64_t retry_at_ns; /* connect again then, after a failed handshake; 0 none */
    int64_t retry_gap_ns;
    uint64_t handshake_failures;
    char cause[FH_ENDPOINT_CAUSE_SIZE];
} s_endpoint_t;

struct fh_endpoint_watch {
    pthread_mutex_t lock; /* the endpoints' fields, for readers on other threads */
    s_endpoint_t *endpoints;
    size_t count;
    bool curve;
    int64_t warn_after_ns; /* 0: no warnings */
};

fh_endpoint_watch_t *
fh_endpoint_watch_new (const char *const *connect, size_t connect_count, const char *const *bind,
                       size_t bind_count, bool curve, int64_t warn_after_ns, int64_t now_ns)
{
    fh_endpoint_watch_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->count = connect_count + bind_count;
    self->endpoints = calloc (self->count + 1, sizeof *self->endpoints);
    if (!self->endpoints) {
        free (self);
        return NULL;
    }
    pthread_mutex_init (&self->lock, NULL);
    self->curve = curve;
    self->warn_after_ns = warn_after_ns;
    for (size_t i = 0; i < self->count; i++) {
        s_endpoint_t *e = &self->endpoints[i];
        e->connect = i < connect_count;
        e->address = e->connect ? connect[i] : bind[i - connect_count];
        e->since_ns = now_ns;
        e->retry_gap_ns = S_RETRY_FIRST;
        if (e->connect && warn_after_ns > 0) {
            e->warn_at_ns = now_ns + warn_after_ns;
            e->warn_gap_ns = warn_after_ns;
        }
    }
    return self;
}

void
fh_endpoint_watch_destroy (fh_endpoint_watch_t **self_p)
{
    fh_endpoint_watch_t *self = *self_p;
    if (!self)
        return;
    pthread_mutex_destroy (&self->lock);
    free (self->endpoints);
    free (self);
    *self_p = NULL;
}

/* What a failed handshake's event says, in words. */
static void
s_handshake_cause (const fh_endpoint_watch_t *self, const s_endpoint_t *e, int event,
                   uint32_t value, char *out, size_t size)
{
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        snprintf (out, size,
                  "handshake failed: refused by the peer's authentication (ZAP status %u)",
                  (unsigned) value);
    else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        /* The peer hung up first: it may have seen the mismatch itself. */
        snprintf (out, size, "handshake failed: the peer closed the connection (%s)%s",
                  zmq_strerror ((int) value),
                  !e->connect   ? ""
                  : self->curve ? "; a wrong bus.curve.server_public_key, or a plaintext peer?"
                                : "; a CURVE peer?");
    else if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
        snprintf (out, size,
                  "handshake failed: security mechanism mismatch (CURVE on one side, plaintext "
                  "on the other)");
    else if (value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
        snprintf (out, size, "handshake failed: CURVE could not decrypt (a wrong key?)");
    else
        snprintf (out, size, "handshake failed: ZMTP protocol error 0x%x", (unsigned) value);
}

static bool
s_is_handshake_failure (int event)
{
    return event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
           || event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
}

/* The state changes of a bus.connect endpoint: what its events mean and
   say. Called with the lock held; true: disconnect it now. */
static bool
s_connect_event (fh_endpoint_watch_t *self, s_endpoint_t *e, int event, uint32_t value,
                 int64_t now_ns)
{
    switch (event) {
    case ZMQ_EVENT_CONNECT_DELAYED: e->opened = true; break;
    case ZMQ_EVENT_CLOSED:
        e->opened = true;
        snprintf (e->cause, sizeof e->cause, "connection refused or unreachable");
        break;
    case ZMQ_EVENT_CONNECT_RETRIED:
        /* libzmq resolves the name before it opens a socket: a retry with
           no socket opened since the last one is a name that did not
           resolve. */
        if (!e->opened)
            snprintf (e->cause, sizeof e->cause, "name not resolved");
        e->opened = false;
        break;
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        if (e->failing || e->warned)
            fh_info ("bus: connected to %s (%llu failed handshakes before)", e->address,
                     (unsigned long long) e->handshake_failures);
        else
            fh_info ("bus: connected to %s", e->address);
        e->up = true;
        e->since_ns = now_ns;
        e->failing = e->warned = false;
        e->warn_at_ns = e->retry_at_ns = 0;
        e->retry_gap_ns = S_RETRY_FIRST;
        break;
    case ZMQ_EVENT_DISCONNECTED:
        if (!e->up)
            break; /* a failed handshake's end: already told */
        fh_info ("bus: disconnected from %s; reconnecting", e->address);
        snprintf (e->cause, sizeof e->cause, "disconnected");
        e->up = false;
        e->since_ns = now_ns;
        if (self->warn_after_ns > 0) {
            e->warn_at_ns = now_ns + self->warn_after_ns;
            e->warn_gap_ns = self->warn_after_ns;
        }
        break;
    default:
        if (!s_is_handshake_failure (event))
            break;
        e->handshake_failures++;
        s_handshake_cause (self, e, event, value, e->cause, sizeof e->cause);
        if (!e->failing)
            fh_warning ("bus: %s: %s; trying again with backoff (counted in the endpoint's "
                        "handshake_failures)",
                        e->address, e->cause);
        e->failing = true;
        e->retry_at_ns = now_ns + e->retry_gap_ns;
        e->retry_gap_ns = e->retry_gap_ns * 2 < S_RETRY_MAX ? e->retry_gap_ns * 2 : S_RETRY_MAX;
        return true;
    }
    return false;
}

bool
fh_endpoint_watch_event (fh_endpoint_watch_t *self, size_t i, int event, uint32_t value,
                         int64_t now_ns)
{
    if (i >= self->count)
        return false;
    s_endpoint_t *e = &self->endpoints[i];
    pthread_mutex_lock (&self->lock);
    bool detach = false;
    if (e->connect)
        detach = s_connect_event (self, e, event, value, now_ns);
    else if (s_is_handshake_failure (event)) {
        e->handshake_failures++;
        s_handshake_cause (self, e, event, value, e->cause, sizeof e->cause);
    }
    pthread_mutex_unlock (&self->lock);
    return detach;
}

void
fh_endpoint_watch_peers (fh_endpoint_watch_t *self, size_t i, int peers, int64_t now_ns)
{
    if (i >= self->count || self->endpoints[i].connect)
        return;
    s_endpoint_t *e = &self->endpoints[i];
    pthread_mutex_lock (&self->lock);
    if (e->up != (peers > 0)) {
        e->up = peers > 0;
        e->since_ns = now_ns;
    }
    pthread_mutex_unlock (&self->lock);
}

void
fh_endpoint_watch_note (fh_endpoint_watch_t *self, size_t i, const char *cause)
{
    if (i >= self->count)
        return;
    pthread_mutex_lock (&self->lock);
    snprintf (self->endpoints[i].cause, sizeof self->endpoints[i].cause, "%s", cause);
    pthread_mutex_unlock (&self->lock);
}

size_t
fh_endpoint_watch_due (fh_endpoint_watch_t *self, int64_t now_ns)
{
    size_t again = SIZE_MAX;
    pthread_mutex_lock (&self->lock);
    for (size_t i = 0; i < self->count; i++) {
        s_endpoint_t *e = &self->endpoints[i];
        if (e->warn_at_ns && now_ns >= e->warn_at_ns && !e->up) {
            fh_warning ("bus: %s has not connected for %.1f s: %s; still trying", e->address,
                        (double) (now_ns - e->since_ns) / 1e9,
                        e->cause[0] ? e->cause : "no answer yet");
            e->warned = true;
            e->warn_gap_ns = e->warn_gap_ns * 2 < S_WARN_GAP_MAX ? e->warn_gap_ns * 2
                                                                 : S_WARN_GAP_MAX;
            e->warn_at_ns = now_ns + e->warn_gap_ns;
        }
        if (again == SIZE_MAX && e->retry_at_ns && now_ns >= e->retry_at_ns) {
            e->retry_at_ns = 0;
            e->opened = false;
            again = i;
        }
    }
    pthread_mutex_unlock (&self->lock);
    return again;
}

long
fh_endpoint_watch_timeout_ms (const fh_endpoint_watch_t *self, int64_t now_ns)
{
    int64_t next = 0;
    for (size_t i = 0; i < self->count; i++) {
        const s_endpoint_t *e = &self->endpoints[i];
        int64_t at[2] = {e->up ? 0 : e->warn_at_ns, e->retry_at_ns};
        for (int k = 0; k < 2; k++)
            if (at[k] && (!next || at[k] < next))
                next = at[k];
    }
    if (!next)
        return -1;
    return next <= now_ns ? 0 : (long) ((next - now_ns + 999999) / 1000000);
}

void
fh_endpoint_watch_read (fh_endpoint_watch_t *self, size_t i, fh_endpoint_status_t *out)
{
    memset (out, 0, sizeof *out);
    if (i >= self->count)
        return;
    pthread_mutex_lock (&self->lock);
    const s_endpoint_t *e = &self->endpoints[i];
    out->connected = e->up;
    out->since_ns = e->since_ns;
    out->handshake_failures = e->handshake_failures;
    snprintf (out->last_error, sizeof out->last_error, "%s", e->cause);
    pthread_mutex_unlock (&self->lock);
}
