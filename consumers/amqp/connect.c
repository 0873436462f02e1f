/*  connect.c - one connection to the broker, made ready to publish.

    The socket (TLS when asked) and the login, channel 1, the exchange
    checked (a passive declare: a missing exchange is said at connect, not
    by a closed channel at the first publish), the topology declared when
    asked (declare.c), and publisher confirms turned on. It keeps no state:
    link.c's thread calls it at each (re)connection and owns what it
    returns; what happens on the connection after is link.c's.
*/
#include "bridge.h"

#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#define CONNECT_FRAME_MAX 131072

static struct timeval
s_timeval (int64_t ns)
{
    return (struct timeval){.tv_sec = ns / 1000000000, .tv_usec = (ns % 1000000000) / 1000};
}

/* Opens the socket of conn (TLS when asked) and logs in; -1 with why.
   *refused is set when the broker refused the login or the vhost. */
static int
s_open (amqp_connection_state_t conn, const bridge_options_t *o, bool *refused, char *why,
        size_t whylen)
{
    amqp_socket_t *sock = o->tls ? amqp_ssl_socket_new (conn) : amqp_tcp_socket_new (conn);
    if (!sock) {
        snprintf (why, whylen, "out of memory");
        return -1;
    }
    if (o->tls) {
        amqp_ssl_socket_set_verify_peer (sock, o->verify_peer);
        amqp_ssl_socket_set_verify_hostname (sock, o->verify_hostname);
        if (o->ca_file && amqp_ssl_socket_set_cacert (sock, o->ca_file) != AMQP_STATUS_OK) {
            snprintf (why, whylen, "tls.ca_file %s: cannot be read as PEM", o->ca_file);
            return -1;
        }
        if (o->cert_file
            && amqp_ssl_socket_set_key (sock, o->cert_file, o->key_file) != AMQP_STATUS_OK) {
            snprintf (why, whylen, "tls.cert_file %s with tls.key_file %s: cannot be used",
                      o->cert_file, o->key_file);
            return -1;
        }
    }
    struct timeval timeout = s_timeval (o->connect_timeout_ns);
    int rc = amqp_socket_open_noblock (sock, o->host, o->port, &timeout);
    if (rc != AMQP_STATUS_OK) {
        snprintf (why, whylen, "cannot connect to %s:%d: %s", o->host, o->port,
                  amqp_error_string2 (rc));
        return -1;
    }
    amqp_set_handshake_timeout (conn, &timeout);
    amqp_set_rpc_timeout (conn, &timeout);
    amqp_rpc_reply_t r = amqp_login (conn, o->vhost, 0, CONNECT_FRAME_MAX, o->heartbeat_s,
                                     AMQP_SASL_METHOD_PLAIN, o->user, o->password);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        *refused = bridge_refused_login (&r);
        bridge_reply_why (&r, "login", why, whylen);
        return -1;
    }
    return 0;
}

/* Opens channel 1, checks that the exchange exists, declares the
   topology, and turns on publisher confirms; -1 with why. *refused is set
   when the broker has no such exchange. */
static int
s_channel (amqp_connection_state_t conn, const bridge_options_t *o, bool *refused, char *why,
           size_t whylen)
{
    amqp_channel_open (conn, BRIDGE_CHANNEL);
    amqp_rpc_reply_t r = amqp_get_rpc_reply (conn);
    if (r.reply_type == AMQP_RESPONSE_NORMAL && *o->exchange) {
        amqp_exchange_declare (conn, BRIDGE_CHANNEL, amqp_cstring_bytes (o->exchange),
                               amqp_cstring_bytes ("topic"), 1, 0, 0, 0, amqp_empty_table);
        r = amqp_get_rpc_reply (conn);
        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
            /* A missing exchange is a configuration error too. */
            *refused = r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION
                       && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD
                       && ((amqp_channel_close_t *) r.reply.decoded)->reply_code == AMQP_NOT_FOUND;
            bridge_reply_why (&r, "exchange", why, whylen);
            snprintf (why + strlen (why), whylen - strlen (why), " (options.exchange %s)",
                      o->exchange);
            return -1;
        }
    }
    if (r.reply_type == AMQP_RESPONSE_NORMAL && o->declare.on
        && bridge_declare_run (&o->declare, o->exchange, conn, BRIDGE_CHANNEL, why, whylen))
        return -1;
    if (r.reply_type == AMQP_RESPONSE_NORMAL) {
        amqp_confirm_select (conn, BRIDGE_CHANNEL);
        r = amqp_get_rpc_reply (conn);
    }
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        bridge_reply_why (&r, "channel", why, whylen);
        return -1;
    }
    return 0;
}

void *
bridge_connect (const bridge_options_t *opts, bool *refused, char *why, size_t whylen)
{
    *refused = false;
    amqp_connection_state_t conn = amqp_new_connection ();
    if (!conn) {
        snprintf (why, whylen, "out of memory");
        return NULL;
    }
    if (s_open (conn, opts, refused, why, whylen) != 0
        || s_channel (conn, opts, refused, why, whylen) != 0) {
        amqp_destroy_connection (conn);
        return NULL;
    }
    return conn;
}
