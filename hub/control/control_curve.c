/*  control_curve - CURVE on a tcp:// control endpoint. See control_curve.h. */
#include "control_curve.h"

#include "fdlimit.h"
#include "log.h"
#include "zap.h"

#include <czmq.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define S_DOMAIN "fanhub-control"
#define CONTROL_BACKLOG 8

struct fh_control_guard {
    void *context; /* CZMQ's, or (CURVE) this guard's own */
    bool own_context;
    void *router;
    void *monitor; /* PAIR: the router's connections and handshake failures */
    fh_zap_t *zap;
    fh_zap_policy_t policy;
    const char **allow; /* control_curve.allow and the client_key_file's key */
    atomic_uint_fast64_t *denied;
    atomic_uint_fast64_t *refused; /* connections shed past max_clients */
    size_t clients, max_clients;
    const char *endpoint; /* the configuration's control */
    /* ipc:// in a private directory: the socket's file is renamed to
       `hidden` while the budget is full (s_hide). */
    char *hidden;
    bool hiding, hidden_now;
};

static void s_hiding_init (fh_control_guard_t *self);

/* Reads one monitor event: false when none was waiting. */
static bool
s_read_event (void *monitor, uint16_t *event, uint32_t *value)
{
    zmq_msg_t frame;
    zmq_msg_init (&frame);
    if (zmq_msg_recv (&frame, monitor, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close (&frame);
        return false;
    }
    *event = 0;
    *value = 0;
    if (zmq_msg_size (&frame) >= 6) {
        memcpy (event, zmq_msg_data (&frame), 2);
        memcpy (value, (const char *) zmq_msg_data (&frame) + 2, 4);
    }
    bool more = zmq_msg_more (&frame);
    while (more) { /* the address frame */
        zmq_msg_close (&frame);
        zmq_msg_init (&frame);
        if (zmq_msg_recv (&frame, monitor, 0) < 0)
            break;
        more = zmq_msg_more (&frame);
    }
    zmq_msg_close (&frame);
    return true;
}

/* A PAIR that receives socket's events (in context, the socket's). */
static void *
s_monitor (void *context, void *socket, int events)
{
    char endpoint[64];
    snprintf (endpoint, sizeof endpoint, "inproc://fanhub-control-monitor-%p", socket);
    if (zmq_socket_monitor (socket, endpoint, events) != 0)
        return NULL;
    void *monitor = zmq_socket (context, ZMQ_PAIR);
    int zero = 0;
    if (monitor
        && (zmq_setsockopt (monitor, ZMQ_LINGER, &zero, sizeof zero) != 0
            || zmq_connect (monitor, endpoint) != 0)) {
        zmq_close (monitor);
        monitor = NULL;
    }
    return monitor;
}

/* The CURVE server: a context, its ZAP handler, keys on the router. */
static int
s_serve_curve (fh_control_guard_t *self, const fh_config_t *config, char *err, size_t errlen)
{
    /* The listed keys, the local clients' and the hub's own (its /metrics
       thread is a client too). */
    size_t listed = config->control_curve.allow.count;
    self->allow = calloc (listed + 2, sizeof *self->allow);
    if (!self->allow) {
        snprintf (err, errlen, "control: out of memory");
        return -1;
    }
    for (size_t i = 0; i < listed; i++)
        self->allow[i] = config->control_curve.allow.items[i];
    if (config->control_curve.client_key_file)
        self->allow[listed++] = config->control_curve.client_public_key;
    self->allow[listed++] = config->control_curve.public_key;
    self->policy = (fh_zap_policy_t){
        .domain = S_DOMAIN,
        .curve = 1,
        .allow = self->allow,
        .allow_count = listed,
        .allow_dir = config->control_curve.allow_dir,
        .denied = self->denied,
    };
    self->zap = fh_zap_new (self->context, &self->policy, 1, err, errlen);
    if (!self->zap)
        return -1;
    int one = 1;
    if (zmq_setsockopt (self->router, ZMQ_ZAP_DOMAIN, S_DOMAIN, strlen (S_DOMAIN)) != 0
        || zmq_setsockopt (self->router, ZMQ_CURVE_SERVER, &one, sizeof one) != 0
        || zmq_setsockopt (self->router, ZMQ_CURVE_SECRETKEY, config->control_curve.secret_key, 40)
               != 0) {
        snprintf (err, errlen, "control: CURVE refused: %s (libzmq without CURVE?)",
                  zmq_strerror (zmq_errno ()));
        return -1;
    }
    return 0;
}

fh_control_guard_t *
fh_control_guard_new (const fh_config_t *config, atomic_uint_fast64_t *denied,
                      atomic_uint_fast64_t *refused, char *err, size_t errlen)
{
    fh_control_guard_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "control: out of memory");
        return NULL;
    }
    self->denied = denied;
    self->refused = refused;
    self->endpoint = config->control;
    self->max_clients = fh_fdlimit_control_budget ();
    s_hiding_init (self);
    bool curve = config->control_curve.secret_key_file != NULL;
    self->own_context = curve;
    self->context = curve ? zmq_ctx_new () : zsys_init ();
    self->router = self->context ? zmq_socket (self->context, ZMQ_ROUTER) : NULL;
    if (!self->router) {
        snprintf (err, errlen, "control: cannot create the socket: %s",
                  zmq_strerror (zmq_errno ()));
        fh_control_guard_destroy (&self);
        return NULL;
    }
    int zero = 0, one = 1;
    zmq_setsockopt (self->router, ZMQ_LINGER, &zero, sizeof zero);
    /* A short listen queue: what a flood gets accepted after the socket
       is hidden (s_hide) is at most this; a client past it waits (or its
       libzmq retries) until there is room. */
    int backlog = CONTROL_BACKLOG;
    zmq_setsockopt (self->router, ZMQ_BACKLOG, &backlog, sizeof backlog);
    if (strstr (config->control, "://["))
        zmq_setsockopt (self->router, ZMQ_IPV6, &one, sizeof one);
    if (curve && s_serve_curve (self, config, err, errlen) != 0) {
        fh_control_guard_destroy (&self);
        return NULL;
    }
    int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_ACCEPT_FAILED
                 | (curve ? ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL : 0);
    self->monitor = s_monitor (self->context, self->router, events);
    if (!self->monitor) {
        snprintf (err, errlen, "control: cannot monitor the socket: %s",
                  zmq_strerror (zmq_errno ()));
        fh_control_guard_destroy (&self);
        return NULL;
    }
    return self;
}

void *
fh_control_guard_router (fh_control_guard_t *self)
{
    return self->router;
}

void *
fh_control_guard_monitor (fh_control_guard_t *self)
{
    return self->monitor;
}

/* True when fd is still a connection accepted on the control endpoint
   (the event may be old: the descriptor closed and reused since). */
static bool
s_is_ours (const char *endpoint, int fd)
{
    struct sockaddr_storage local;
    socklen_t size = sizeof local;
    if (getsockname (fd, (struct sockaddr *) &local, &size) != 0)
        return false;
    if (local.ss_family == AF_UNIX && strncmp (endpoint, "ipc://", 6) == 0) {
        const struct sockaddr_un *un = (const struct sockaddr_un *) &local;
        return strncmp (un->sun_path, endpoint + 6, sizeof un->sun_path) == 0;
    }
    const char *colon = strrchr (endpoint, ':');
    int port = colon ? atoi (colon + 1) : -1;
    if (local.ss_family == AF_INET)
        return ntohs (((struct sockaddr_in *) &local)->sin_port) == port;
    if (local.ss_family == AF_INET6)
        return ntohs (((struct sockaddr_in6 *) &local)->sin6_port) == port;
    return false;
}

/* Counts a connection not served, and says so at the 1st, 2nd, 4th, ... */
static void
s_count_refused (fh_control_guard_t *self, const char *why)
{
    uint64_t refused = self->refused ? atomic_fetch_add (self->refused, 1) : 0;
    if (refused == 0 || (refused & (refused + 1)) == 0)
        fh_warning ("control: %s: refused a connection (%llu so far, hub.control_refused)", why,
                    (unsigned long long) refused + 1);
}

/* A client past max_clients: its descriptor goes back at once. libzmq
   owns it, so it is shut down, not closed: libzmq sees the end and closes
   it (and says DISCONNECTED). */
static void
s_shed (fh_control_guard_t *self, int fd)
{
    if (!s_is_ours (self->endpoint, fd) || shutdown (fd, SHUT_RDWR) != 0)
        return;
    char why[96];
    snprintf (why, sizeof why, "%zu clients connected, the most the descriptors allow",
              self->max_clients);
    s_count_refused (self, why);
}

/* A flood of clients: libzmq accepts on its I/O thread faster than this
   thread sheds (a busy machine: a hundred or more in the meantime), and an
   ipc accept that finds the descriptor table full aborts the process
   (ipc_listener.cpp:325). So while the budget is full the socket's file
   is renamed aside: a new client's connect() fails at once (ENOENT) and
   costs the hub nothing; the name comes back when a client leaves. Only
   in a directory nobody else may write: elsewhere another user could take
   the name meanwhile. */
static void
s_hide (fh_control_guard_t *self, bool hide)
{
    if (!self->hiding || self->hidden_now == hide)
        return;
    const char *path = self->endpoint + 6;
    if (hide ? rename (path, self->hidden) != 0 : rename (self->hidden, path) != 0) {
        fh_warning ("control: cannot %s %s: %s", hide ? "hide" : "restore", path, strerror (errno));
        return;
    }
    self->hidden_now = hide;
    if (hide)
        fh_warning ("control: %zu clients connected, the most the descriptors allow: %s is "
                    "renamed %s until one leaves (new clients are refused)",
                    self->max_clients, path, self->hidden);
    else
        fh_info ("control: %s serves new clients again", path);
}

/* ipc:// in a directory only the hub's user may write: s_hide may rename
   the socket there. A hidden name left by a hub that died goes. */
static void
s_hiding_init (fh_control_guard_t *self)
{
    if (strncmp (self->endpoint, "ipc://", 6) != 0)
        return;
    const char *path = self->endpoint + 6;
    size_t size = strlen (path) + sizeof ".busy";
    char *dir = strdup (path);
    self->hidden = malloc (size);
    char *slash = dir ? strrchr (dir, '/') : NULL;
    struct stat st, old;
    if (dir && self->hidden && slash) {
        slash[slash == dir] = '\0'; /* "/x" keeps "/" */
        snprintf (self->hidden, size, "%s.busy", path);
        self->hiding = stat (dir, &st) == 0 && S_ISDIR (st.st_mode) && st.st_uid == geteuid ()
                       && !(st.st_mode & (S_IWGRP | S_IWOTH));
        if (self->hiding && lstat (self->hidden, &old) == 0 && S_ISSOCK (old.st_mode))
            unlink (self->hidden);
    }
    free (dir);
}

void
fh_control_guard_on_monitor (fh_control_guard_t *self)
{
    uint16_t event;
    uint32_t value;
    while (self->monitor && s_read_event (self->monitor, &event, &value)) {
        if (event == ZMQ_EVENT_ACCEPTED && ++self->clients > self->max_clients) {
            s_shed (self, (int) value);
            s_hide (self, true);
        }
        /* No descriptor for it: fdlimit.c's accept4 closed it. */
        else if (event == ZMQ_EVENT_ACCEPT_FAILED && value == ECONNABORTED)
            s_count_refused (self, "no descriptor left for a new client");
        else if (event == ZMQ_EVENT_DISCONNECTED && self->clients > 0) {
            if (--self->clients < self->max_clients)
                s_hide (self, false);
        }
        /* A plaintext client, or a CURVE one that used another server
           key: refused before the ZAP handler is asked. */
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                 && (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
                     || value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
                 && self->denied)
            atomic_fetch_add (self->denied, 1);
    }
}

void
fh_control_guard_destroy (fh_control_guard_t **self_p)
{
    fh_control_guard_t *self = *self_p;
    if (!self)
        return;
    /* The monitor stops before the router closes: libzmq sends the events
       of a closing socket's connections (DISCONNECTED, with the endpoint
       in a malloc'd frame) later, from its I/O thread, and leaks a frame
       whose send fails once our end has gone. */
    if (self->monitor) {
        zmq_socket_monitor (self->router, NULL, 0);
        zmq_close (self->monitor);
    }
    if (self->router)
        zmq_close (self->router);
    if (self->hidden_now) /* libzmq unlinks the name it bound, not this one */
        unlink (self->hidden);
    free (self->hidden);
    fh_zap_destroy (&self->zap); /* after the socket it answered for */
    if (self->own_context && self->context)
        zmq_ctx_term (self->context);
    free (self->allow);
    free (self);
    *self_p = NULL;
}

/* ------------------------------------------------------------------ */
/* Client side                                                          */

static fh_control_keys_t s_keys;
static bool s_keys_on;

void
fh_control_client_use_keys (const fh_control_keys_t *keys)
{
    s_keys_on = keys != NULL;
    if (keys)
        s_keys = *keys;
    else
        memset (&s_keys, 0, sizeof s_keys);
}

void
fh_control_client_use_own_keys (const fh_config_t *config)
{
    if (!config->control_curve.secret_key_file)
        return;
    fh_control_keys_t keys;
    snprintf (keys.public_key, sizeof keys.public_key, "%s", config->control_curve.public_key);
    snprintf (keys.secret_key, sizeof keys.secret_key, "%s", config->control_curve.secret_key);
    snprintf (keys.server_key, sizeof keys.server_key, "%s", config->control_curve.public_key);
    fh_control_client_use_keys (&keys);
    memset (keys.secret_key, 0, sizeof keys.secret_key);
}

bool
fh_control_client_curve (void)
{
    return s_keys_on;
}

void *
fh_control_client_guard (void *context, void *socket)
{
    if (s_keys_on) {
        zmq_setsockopt (socket, ZMQ_CURVE_SERVERKEY, s_keys.server_key, 40);
        zmq_setsockopt (socket, ZMQ_CURVE_PUBLICKEY, s_keys.public_key, 40);
        zmq_setsockopt (socket, ZMQ_CURVE_SECRETKEY, s_keys.secret_key, 40);
    }
    return s_monitor (context, socket,
                      ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                          | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL);
}

/* Reads the mechanism (NULL, PLAIN, CURVE) the ZMTP 3 peer at endpoint
   (tcp://HOST:PORT) greets with into mechanism[21]: this end sends a
   signature and its major version, which is when a peer sends the rest
   of its greeting, reads that, and hangs up before naming a mechanism
   of its own (nothing for the hub to refuse or count). False when it
   cannot be read within a second or two. */
static bool
s_peer_mechanism (const char *endpoint, char mechanism[21])
{
    const char *host, *port;
    size_t host_len;
    char name[256];
    if (strncmp (endpoint, "tcp://", 6) != 0
        || fh_endpoint_tcp_split (endpoint + 6, &host, &host_len, &port) != NULL
        || host_len >= sizeof name)
        return false;
    memcpy (name, host, host_len);
    name[host_len] = '\0';
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *found;
    if (getaddrinfo (name, port, &hints, &found) != 0)
        return false;
    int fd = socket (found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    /* Linux bounds connect() by the send timeout too. */
    struct timeval limit = {.tv_sec = 2};
    unsigned char greeting[64];
    size_t have = 0;
    if (fd >= 0 && setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit) == 0
        && setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit) == 0
        && connect (fd, found->ai_addr, found->ai_addrlen) == 0) {
        static const unsigned char hello[11] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3};
        if (send (fd, hello, sizeof hello, MSG_NOSIGNAL) == (ssize_t) sizeof hello)
            for (ssize_t got = 1; have < sizeof greeting && got > 0; have += (size_t) got)
                if ((got = recv (fd, greeting + have, sizeof greeting - have, 0)) <= 0)
                    break;
    }
    if (fd >= 0)
        close (fd);
    freeaddrinfo (found);
    if (have < 32 || greeting[0] != 0xff || greeting[10] < 3)
        return false;
    memcpy (mechanism, greeting + 12, 20);
    mechanism[20] = '\0';
    return true;
}

/* The message for a hub that wants another mechanism than this client's. */
static void
s_say_mismatch (const char *endpoint, char *err, size_t errlen)
{
    if (s_keys_on)
        snprintf (err, errlen,
                  "%s: the hub refused the handshake: it does not speak CURVE "
                  "on this endpoint (no control_curve); drop --curve-key and --server-key",
                  endpoint);
    else
        snprintf (err, errlen,
                  "%s: the hub refused the handshake: it requires CURVE; give "
                  "--curve-key and --server-key (or -c with the hub's configuration)",
                  endpoint);
}

bool
fh_control_client_refused (void *monitor, const char *endpoint, bool *probed, char *err,
                           size_t errlen)
{
    uint16_t event;
    uint32_t value;
    while (s_read_event (monitor, &event, &value)) {
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
            snprintf (err, errlen,
                      "%s: the hub refused this client's key %s (status %u): it "
                      "is not in the hub's control_curve allow, allow_dir or client_key_file",
                      endpoint, s_keys.public_key, (unsigned) value);
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            /* The hub hung up before this end read its greeting (it saw
               the mismatch first): libzmq tries again, and may lose that
               race every time on a busy machine. Its greeting says it,
               read once. */
            if (*probed)
                continue;
            *probed = true;
            char theirs[21];
            if (!s_peer_mechanism (endpoint, theirs)
                || strcmp (theirs, s_keys_on ? "NULL" : "CURVE") != 0)
                continue;
            s_say_mismatch (endpoint, err, errlen);
        }
        else if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
            s_say_mismatch (endpoint, err, errlen);
        else if (value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
            snprintf (err, errlen,
                      "%s: the CURVE handshake failed: is the server key the "
                      "public key of the hub's control_curve.secret_key_file?",
                      endpoint);
        else
            snprintf (err, errlen, "%s: the handshake failed (ZeroMQ protocol error 0x%x)",
                      endpoint, (unsigned) value);
        return true;
    }
    return false;
}
