/*  cmd_check_connect - `fanhub check --connect`: tries every bus endpoint.

    Each bus.connect endpoint gets a SUB socket of its own, with the
    configuration's CURVE client keys, and a socket monitor whose events
    go through endpoint_watch, so the causes are worded as the running
    hub words them: connected (the ZMTP handshake done), name not
    resolved, connection refused or unreachable, handshake failed, or no
    answer within the time. A tcp:// name is also resolved here and its
    addresses shown. Each bus.bind endpoint is bound and unbound at once.
    Opt-in: unlike plain `check`, this touches the network.
*/
#include "commands.h"
#include "config.h"
#include "endpoint_watch.h"
#include "log.h"

#include "clock.h"

#include <arpa/inet.h>
#include <czmq.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

/* "tcp://HOST:PORT": HOST's addresses into out ("" when it has none, or
   it is not a tcp:// name). */
static void
s_resolve (const char *endpoint, char *out, size_t size)
{
    out[0] = '\0';
    if (strncmp (endpoint, "tcp://", 6) != 0)
        return;
    char host[256];
    const char *start = endpoint + 6;
    const char *colon = strrchr (start, ':');
    size_t len = colon ? (size_t) (colon - start) : 0;
    if (len == 0 || len >= sizeof host || *start == '[' || *start == '*')
        return;
    memcpy (host, start, len);
    host[len] = '\0';
    unsigned char numeric[sizeof (struct in6_addr)];
    if (inet_pton (AF_INET, host, numeric) == 1)
        return; /* nothing to resolve */
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *found = NULL;
    int rc = getaddrinfo (host, NULL, &hints, &found);
    if (rc != 0) {
        snprintf (out, size, "%s does not resolve (%s)", host, gai_strerror (rc));
        return;
    }
    size_t used = (size_t) snprintf (out, size, "%s resolves to", host);
    for (struct addrinfo *a = found; a && used < size; a = a->ai_next) {
        char text[INET6_ADDRSTRLEN] = "";
        const void *addr = a->ai_family == AF_INET
                               ? (const void *) &((struct sockaddr_in *) a->ai_addr)->sin_addr
                               : (const void *) &((struct sockaddr_in6 *) a->ai_addr)->sin6_addr;
        inet_ntop (a->ai_family, addr, text, sizeof text);
        if (!strstr (out + strlen (host), text))
            used += (size_t) snprintf (out + used, size - used, " %s", text);
    }
    freeaddrinfo (found);
}

/* One socket per connect endpoint, with its monitor. */
typedef struct {
    zsock_t *sub, *monitor;
    bool done; /* connected, or a cause is known */
} s_probe_t;

static int
s_open_probe (const fh_config_t *config, size_t i, s_probe_t *probe)
{
    probe->sub = zsock_new (ZMQ_SUB);
    probe->monitor = zsock_new (ZMQ_PAIR);
    if (!probe->sub || !probe->monitor)
        return -1;
    void *sub = zsock_resolve (probe->sub);
    zsock_set_linger (probe->sub, 0);
    if (strstr (config->connect.items[i], "://["))
        zsock_set_ipv6 (probe->sub, 1);
    if (config->curve.secret_key_file && config->curve.server_public_key) {
        zmq_setsockopt (sub, ZMQ_CURVE_SECRETKEY, config->curve.secret_key, 40);
        zmq_setsockopt (sub, ZMQ_CURVE_PUBLICKEY, config->curve.public_key, 40);
        zmq_setsockopt (sub, ZMQ_CURVE_SERVERKEY, config->curve.server_public_key, 40);
    }
    char name[64];
    snprintf (name, sizeof name, "inproc://fanhub-check-%zu", i);
    if (zmq_socket_monitor (sub, name, ZMQ_EVENT_ALL) != 0
        || zsock_connect (probe->monitor, "%s", name) != 0)
        return -1;
    return zmq_connect (sub, config->connect.items[i]);
}

/* Feeds the monitor events waiting on probe i into the watch. */
static void
s_drain (fh_endpoint_watch_t *watch, size_t i, s_probe_t *probe)
{
    zmsg_t *msg;
    while ((msg = zmsg_recv_nowait (probe->monitor))) {
        zframe_t *frame = zmsg_first (msg);
        if (frame && zframe_size (frame) >= 6) {
            uint16_t event;
            uint32_t value;
            memcpy (&event, zframe_data (frame), 2);
            memcpy (&value, zframe_data (frame) + 2, 4);
            fh_endpoint_watch_event (watch, i, event, value, fh_clock_mono_ns ());
            fh_endpoint_status_t status;
            fh_endpoint_watch_read (watch, i, &status);
            probe->done = status.connected || status.last_error[0];
        }
        zmsg_destroy (&msg);
    }
}

/* Tries the connect endpoints together, for timeout_ms at most; says
   what each came to. The number that did not connect. */
static size_t
s_connect_all (const fh_config_t *config, fh_endpoint_watch_t *watch, int64_t timeout_ms)
{
    size_t n = config->connect.count, failed = 0;
    s_probe_t *probes = calloc (n + 1, sizeof *probes);
    zpoller_t *poller = zpoller_new (NULL);
    for (size_t i = 0; probes && poller && i < n; i++)
        if (s_open_probe (config, i, &probes[i]) == 0)
            zpoller_add (poller, probes[i].monitor);
        else
            probes[i].done = true; /* said below */
    int64_t end = fh_clock_mono_ns () + timeout_ms * 1000000;
    for (bool all = false; probes && poller && !all && fh_clock_mono_ns () < end;) {
        zpoller_wait (poller, 50);
        all = true;
        for (size_t i = 0; i < n; i++) {
            if (!probes[i].done)
                s_drain (watch, i, &probes[i]);
            all = all && probes[i].done;
        }
    }
    for (size_t i = 0; i < n; i++) {
        char addresses[512];
        s_resolve (config->connect.items[i], addresses, sizeof addresses);
        fh_endpoint_status_t status;
        fh_endpoint_watch_read (watch, i, &status);
        failed += !status.connected;
        printf ("  %s: %s%s%s\n", config->connect.items[i],
                status.connected            ? "connected (handshake done)"
                : !probes || !probes[i].sub ? "cannot make a socket"
                : status.last_error[0]      ? status.last_error
                                            : "no answer yet",
                addresses[0] ? "; " : "", addresses);
        if (probes) {
            if (probes[i].sub) /* see fh_control_guard_destroy */
                zmq_socket_monitor (zsock_resolve (probes[i].sub), NULL, 0);
            zsock_destroy (&probes[i].sub);
            zsock_destroy (&probes[i].monitor);
        }
    }
    zpoller_destroy (&poller);
    free (probes);
    return failed;
}

int
fh_check_connect (const fh_config_t *config, int64_t timeout_ms)
{
    /* The watch words the causes; its log lines would repeat them. */
    fh_log_set_level (FANHUB_LOG_ERROR);
    fh_endpoint_watch_t *watch = fh_endpoint_watch_new (
        (const char *const *) config->connect.items, config->connect.count, NULL, 0,
        config->curve.secret_key_file != NULL, 0, fh_clock_mono_ns ());
    if (!watch) {
        fprintf (stderr, "fanhub check: out of memory\n");
        return FH_EXIT_FAILURE;
    }
    printf ("bus endpoints (--connect, %.3g s at most):\n", (double) timeout_ms / 1000);
    size_t failed = s_connect_all (config, watch, timeout_ms);
    for (size_t i = 0; i < config->bind.count; i++) {
        zsock_t *probe = zsock_new (ZMQ_SUB);
        if (probe && strstr (config->bind.items[i], "://["))
            zsock_set_ipv6 (probe, 1);
        int rc = probe ? zmq_bind (zsock_resolve (probe), config->bind.items[i]) : -1;
        printf ("  %s: %s%s\n", config->bind.items[i],
                rc == 0 ? "can bind" : "cannot bind: ", rc == 0 ? "" : zmq_strerror (zmq_errno ()));
        failed += rc != 0;
        zsock_destroy (&probe);
    }
    fh_endpoint_watch_destroy (&watch);
    return failed ? FH_EXIT_FAILURE : FH_EXIT_OK;
}
