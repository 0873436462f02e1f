/*  enqueuer_peers - the enqueuer's bus endpoints: the SUB socket on
    bus.bind and bus.connect and the PUB socket on bus.publish, their CURVE
    options and ZAP policies, the socket monitor's events, the count of
    peers per endpoint, and the connections dropped at once (past
    bus.max_peers, or with no descriptor left).
*/
#include "enqueuer_internal.h"

#include "clock.h"
#include "fdlimit.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>

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
   localhost): the bind endpoint whose port it is; a connect endpoint
   whose name libzmq resolved is named by the address: the connect
   endpoint with that port. When neither names one, the only endpoint of
   that kind (fallback); SIZE_MAX when unknown. */
static size_t
s_endpoint_index (fh_enqueuer_t *self, const char *address, bool accepted, bool fallback)
{
    const fh_config_t *config = self->config;
    const fh_strlist_t *list = accepted ? &config->bind : &config->connect;
    size_t base = accepted ? config->connect.count : 0;
    for (size_t i = 0; i < list->count; i++)
        if (strcmp (list->items[i], address) == 0)
            return base + i;
    int port = s_port_of (address);
    for (size_t i = 0; port > 0 && i < list->count; i++)
        if (accepted ? self->bind_ports[i] == port : s_port_of (list->items[i]) == port)
            return base + i;
    return fallback && list->count == 1 ? base : SIZE_MAX;
}

/* A connection to a bind endpoint dropped at once: counted in
   peers_refused, and logged at the 1st, 2nd, 4th, 8th, ... one. */
static void
s_count_refused (fh_enqueuer_t *self, const char *address, const char *why)
{
    uint64_t refused = atomic_load (&self->peers_refused);
    fh_bump (&self->peers_refused);
    if (refused == 0 || (refused & (refused + 1)) == 0)
        fh_warning ("bus: %s %s: refused a connection (%llu so far, hub.peers_refused)", address,
                    why, (unsigned long long) refused + 1);
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
    char why[64];
    snprintf (why, sizeof why, "has %d peers, its bus.max_peers", self->max_peers);
    s_count_refused (self, address, why);
}

/* Reads one monitor event: its number, value and address. False when
   none was waiting. */
static bool
s_read_event (void *monitor, uint16_t *event, uint32_t *value, char *address, size_t size)
{
    zmq_msg_t frame;
    if (!fh_enq_recv_now (monitor, &frame))
        return false;
    *event = 0;
    *value = 0; /* the descriptor of ACCEPTED, the error of a failure */
    if (zmq_msg_size (&frame) >= 6) {
        memcpy (event, zmq_msg_data (&frame), 2);
        memcpy (value, (const char *) zmq_msg_data (&frame) + 2, 4);
    }
    bool more = zmq_msg_more (&frame);
    address[0] = '\0';
    if (more) {
        zmq_msg_close (&frame);
        zmq_msg_init (&frame);
        if (zmq_msg_recv (&frame, monitor, 0) >= 0) {
            size_t n = zmq_msg_size (&frame);
            if (n >= size)
                n = size - 1;
            memcpy (address, zmq_msg_data (&frame), n);
            address[n] = '\0';
        }
    }
    zmq_msg_close (&frame);
    return true;
}

/* The endpoint of an event that does not say which side made the
   connection (a handshake's end, a disconnect): the connect endpoints
   first, then the bind ones; by name, then the only one of its kind. */
static size_t
s_either_endpoint (fh_enqueuer_t *self, const char *address)
{
    size_t i = s_endpoint_index (self, address, false, false);
    if (i == SIZE_MAX)
        i = s_endpoint_index (self, address, true, false);
    if (i == SIZE_MAX) {
        i = s_endpoint_index (self, address, false, true);
        if (i == SIZE_MAX || atomic_load (&self->peers[i]) == 0)
            i = s_endpoint_index (self, address, true, true);
    }
    return i;
}

/* A handshake a bind endpoint refused before ZAP was asked: on a CURVE
   socket any (a plaintext peer, a key that does not decrypt, a peer that
   hung up mid-handshake having seen the mismatch first), on a plaintext
   one a CURVE peer. Counted in auth_denied and logged, rate-limited. A
   ZAP refusal (FAILED_AUTH) was counted by zap.c. */
static void
s_refused_peer (fh_enqueuer_t *self, size_t i, uint16_t event, uint32_t value)
{
    bool curve = self->config->curve.secret_key_file != NULL;
    bool refused = curve ? event != ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                         : event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                               && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH;
    if (!refused)
        return;
    fh_bump (&self->auth_denied);
    fh_endpoint_status_t status;
    fh_endpoint_watch_read (self->watch, i, &status);
    fh_log_limited (&self->refused_log, FANHUB_LOG_WARNING,
                    "bus: %s refused a peer: %s (%llu refused so far, hub.auth_denied)",
                    self->config->bind.items[i - self->config->connect.count], status.last_error,
                    (unsigned long long) atomic_load (&self->auth_denied));
}

/* Handles one monitor event; false when none was waiting. */
bool
fh_enq_monitor_event (fh_enqueuer_t *self, void *monitor)
{
    uint16_t event;
    uint32_t value;
    char address[512];
    if (!s_read_event (monitor, &event, &value, address, sizeof address))
        return false;
    const fh_config_t *config = self->config;
    int64_t now = fh_clock_mono_ns ();
    size_t i;
    switch (event) {
    case ZMQ_EVENT_ACCEPTED:
    case ZMQ_EVENT_ACCEPT_FAILED: /* named by the listener's address */
        i = s_endpoint_index (self, address, true, true);
        break;
    case ZMQ_EVENT_CONNECTED:
    case ZMQ_EVENT_CONNECT_DELAYED:
    case ZMQ_EVENT_CONNECT_RETRIED:
    case ZMQ_EVENT_CLOSED: i = s_endpoint_index (self, address, false, true); break;
    default: i = s_either_endpoint (self, address); break;
    }
    if (i == SIZE_MAX)
        return true;
    self->watch_due_ns = 0; /* the event may move the next due time */
    if (fh_endpoint_watch_event (self->watch, i, event, value, now)) {
        /* libzmq gives up after a mechanism mismatch and retries a
           closed handshake at once for ever: the watch retries it. */
        if (zmq_disconnect (self->sub_handle, config->connect.items[i]) != 0)
            fh_debug ("bus: disconnect %s: %s", config->connect.items[i],
                      zmq_strerror (zmq_errno ()));
    }
    /* fdlimit.c's accept4 took and closed a connection the descriptor
       table had no room for. libzmq leaves any other failed accept
       (ENFILE, ENOBUFS) waiting in the backlog: not refused. */
    if (i >= config->connect.count && event == ZMQ_EVENT_ACCEPT_FAILED && value == ECONNABORTED)
        s_count_refused (self, address, "has no descriptor left for a new connection");
    if (i >= config->connect.count
        && (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
            || event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL))
        s_refused_peer (self, i, event, value);
    int delta = event == ZMQ_EVENT_CONNECTED || event == ZMQ_EVENT_ACCEPTED ? 1
                : event == ZMQ_EVENT_DISCONNECTED                           ? -1
                                                                            : 0;
    if (delta == 0)
        return true;
    int now_peers = atomic_load (&self->peers[i]) + delta;
    atomic_store (&self->peers[i], now_peers < 0 ? 0 : now_peers);
    if (i >= config->connect.count) {
        int all = atomic_load (&self->bind_peers) + delta;
        atomic_store (&self->bind_peers, all < 0 ? 0 : all);
        fh_endpoint_watch_peers (self->watch, i, now_peers, now);
    }
    if (event == ZMQ_EVENT_ACCEPTED && now_peers > self->max_peers)
        s_shed (self, address, (int) value);
    return true;
}

long
fh_enq_watch_tick (fh_enqueuer_t *self, int64_t now)
{
    const fh_config_t *config = self->config;
    /* Between two due times only the clock is read: the watch's lock is
       not taken once per message. */
    if (now < self->watch_due_ns)
        return (long) ((self->watch_due_ns - now + 999999) / 1000000);
    size_t i;
    while ((i = fh_endpoint_watch_due (self->watch, now)) != SIZE_MAX)
        if (i < config->connect.count
            && zmq_connect (self->sub_handle, config->connect.items[i]) != 0)
            fh_warning ("bus.connect: cannot connect %s again: %s", config->connect.items[i],
                        zmq_strerror (zmq_errno ()));
    long timeout = fh_endpoint_watch_timeout_ms (self->watch, now);
    self->watch_due_ns = timeout < 0 ? INT64_MAX : now + (int64_t) timeout * 1000000;
    return timeout;
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
                    "endpoint, a reserve kept): using %zu",
                    max_peers, per_endpoint, per_endpoint ? per_endpoint : 1);
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
    fh_zap_t *zap
        = fh_zap_new (zsys_init (), self->policies, 2, self->start_error, sizeof self->start_error);
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

int
fh_enqueuer_endpoint_peers (fh_enqueuer_t *self, size_t i)
{
    return atomic_load (&self->peers[i]);
}

void
fh_enqueuer_endpoint_status (fh_enqueuer_t *self, size_t i, fh_endpoint_status_t *out)
{
    fh_endpoint_watch_read (self->watch, i, out);
    size_t connects = self->config->connect.count;
    if (i >= connects && i - connects < self->config->bind.count
        && self->bind_ports[i - connects] > 0)
        out->port = self->bind_ports[i - connects]; /* set before the hub started */
}

/* The socket monitor tells which endpoints have a connection; it must
   listen before the first connect, or early events are lost. NULL when
   it cannot be made (the peers then go uncounted). */
static zsock_t *
s_open_monitor (fh_enqueuer_t *self, zsock_t *sub)
{
    char monitor_endpoint[64];
    snprintf (monitor_endpoint, sizeof monitor_endpoint, "inproc://fanhub-monitor-%p",
              (void *) self);
    zsock_t *monitor = NULL;
    if (zmq_socket_monitor (
            zsock_resolve (sub), monitor_endpoint,
            ZMQ_EVENT_CONNECTED | ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_ACCEPT_FAILED
                | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECT_DELAYED | ZMQ_EVENT_CONNECT_RETRIED
                | ZMQ_EVENT_CLOSED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED
                | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
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
    return monitor;
}

/* Makes the bus sockets: SUB on bus.bind and bus.connect with its
   monitor, PUB on bus.publish, and the ZAP handler that guards them.
   -1 when the SUB socket cannot be made; otherwise 0, with start_error
   set when an endpoint failed (s is then still the caller's to close). */
int
fh_enq_open_bus (fh_enqueuer_t *self, fh_enq_bus_t *s)
{
    const fh_config_t *config = self->config;
    *s = (fh_enq_bus_t){0};
    s->sub = zsock_new (ZMQ_SUB);
    if (!s->sub) {
        snprintf (self->start_error, sizeof self->start_error, "cannot create the bus socket: %s",
                  zmq_strerror (zmq_errno ()));
        return -1;
    }
    zsock_t *sub = s->sub;
    zsock_set_rcvhwm (sub, config->rcvhwm);
    zsock_set_linger (sub, 0);
    /* Who may connect (zap.h): before any bind, since libzmq asks at the
       first handshake. */
    if (config->bind.count + config->publish.count)
        s->zap = s_start_zap (self);
    if (s_any_ipv6_literal (&config->connect) || s_any_ipv6_literal (&config->bind))
        zsock_set_ipv6 (sub, 1);
    const char *const *subscriptions;
    size_t subscription_count = fh_trigger_subscriptions (self->trigger, &subscriptions);
    for (size_t i = 0; i < subscription_count; i++)
        zsock_set_subscribe (sub, subscriptions[i]);
    s->monitor = s_open_monitor (self, sub);
    /* libzmq takes a socket's options when an endpoint is bound or
       connected: the bind endpoints get the server's, then the connect
       endpoints the client's. */
    s_secure (self, zsock_resolve (sub), "fanhub-bus", true);
    for (size_t i = 0; i < config->bind.count && !self->start_error[0]; i++) {
        if (zmq_bind (zsock_resolve (sub), config->bind.items[i]) != 0)
            snprintf (self->start_error, sizeof self->start_error, "bus.bind: cannot bind %s: %s",
                      config->bind.items[i], zmq_strerror (zmq_errno ()));
        char bound[256] = "";
        size_t size = sizeof bound;
        zmq_getsockopt (zsock_resolve (sub), ZMQ_LAST_ENDPOINT, bound, &size);
        self->bind_ports[i] = s_port_of (bound); /* the port a wildcard one got */
        if (!self->start_error[0])
            fh_info ("bus.bind: listening on %s", bound);
    }
    s_secure (self, zsock_resolve (sub), "", false);
    for (size_t i = 0; i < config->connect.count && !self->start_error[0]; i++)
        if (zmq_connect (zsock_resolve (sub), config->connect.items[i]) != 0)
            snprintf (self->start_error, sizeof self->start_error,
                      "bus.connect: cannot connect %s: %s", config->connect.items[i],
                      zmq_strerror (zmq_errno ()));
    /* bus.publish: where emitted messages are published too. */
    if (config->publish.count && !self->start_error[0]) {
        s->publish = zsock_new (ZMQ_PUB);
        if (s->publish) {
            zsock_set_linger (s->publish, 0);
            if (s_any_ipv6_literal (&config->publish))
                zsock_set_ipv6 (s->publish, 1);
            self->publish = zsock_resolve (s->publish);
            s_secure (self, self->publish, "fanhub-publish", true);
        }
        for (size_t i = 0; i < config->publish.count && !self->start_error[0]; i++)
            if (!s->publish || zmq_bind (self->publish, config->publish.items[i]) != 0)
                snprintf (self->start_error, sizeof self->start_error,
                          "bus.publish: cannot bind %s: %s", config->publish.items[i],
                          zmq_strerror (zmq_errno ()));
    }
    return 0;
}

/* Closes what fh_enq_open_bus made; the endpoints have no peers after. */
void
fh_enq_close_bus (fh_enqueuer_t *self, fh_enq_bus_t *s)
{
    const fh_config_t *config = self->config;
    if (s->monitor) {
        zmq_socket_monitor (zsock_resolve (s->sub), NULL, 0);
        zsock_destroy (&s->monitor);
    }
    zsock_destroy (&s->publish);
    self->publish = NULL;
    zsock_destroy (&s->sub);
    fh_zap_destroy (&s->zap); /* after the sockets it answered for */
    for (size_t i = 0; i < config->connect.count + config->bind.count; i++)
        atomic_store (&self->peers[i], 0); /* the socket is gone */
}
