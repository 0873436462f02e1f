/*  control_client - a client's side of the control socket: one request,
    one answer (fanhub stats, reload, emit, ...). See control.h. */
#include "control.h"

#include "clock.h"
#include "control_curve.h"
#include "control_path.h"

#include <czmq.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *
fh_control_call (const char *endpoint, const char *command, int timeout_ms, char *err,
                 size_t errlen)
{
    fanhub_bytes_t frame = {command, strlen (command)};
    return fh_control_call_frames (endpoint, &frame, 1, timeout_ms, err, errlen);
}

/* Waits up to timeout_ms for the answer on req: true when it is there;
   else false with err set, at once when monitor (or NULL) tells that
   the hub refused the handshake. */
static bool
s_wait_answer (void *req, void *monitor, const char *endpoint, int timeout_ms, char *err,
               size_t errlen)
{
    zmq_pollitem_t items[] = {{req, 0, ZMQ_POLLIN, 0}, {monitor, 0, ZMQ_POLLIN, 0}};
    int64_t deadline = fh_clock_mono_ns () + (int64_t) timeout_ms * 1000000;
    bool probed = false;
    while (true) {
        int64_t left_ms = (deadline - fh_clock_mono_ns ()) / 1000000;
        if (left_ms <= 0)
            break;
        int rc = zmq_poll (items, monitor ? 2 : 1, (long) left_ms);
        if (rc < 0)
            break; /* a signal: the command decides (stats --watch stops) */
        if (rc > 0 && (items[0].revents & ZMQ_POLLIN))
            return true;
        if (rc > 0 && (items[1].revents & ZMQ_POLLIN)
            && fh_control_client_refused (monitor, endpoint, &probed, err, errlen))
            return false;
    }
    snprintf (err, errlen, "%s: no answer within %d ms: is the hub running?%s", endpoint,
              timeout_ms,
              fh_control_client_curve () ? " (and is the server key its control public key?)" : "");
    return false;
}

char *
fh_control_call_frames (const char *endpoint, const fanhub_bytes_t *frames, size_t count,
                        int timeout_ms, char *err, size_t errlen)
{
    /* A hub full of clients hides its socket for a while: waited for
       within the timeout. Nothing is sent to a socket that another user
       may have put there. */
    if (strncmp (endpoint, "ipc://", 6) == 0) {
        int waited = fh_control_path_wait_shown (endpoint + 6, timeout_ms);
        timeout_ms = waited < timeout_ms ? timeout_ms - waited : 1;
        if (fh_control_path_check_owner (endpoint + 6, err, errlen) != 0)
            return NULL;
    }
    zsock_t *req = zsock_new (ZMQ_REQ);
    if (!req) {
        snprintf (err, errlen, "cannot create a socket: %s", zmq_strerror (zmq_errno ()));
        return NULL;
    }
    zsock_set_linger (req, 0);
    zsock_set_rcvtimeo (req, timeout_ms);
    zsock_set_sndtimeo (req, timeout_ms);
    if (strstr (endpoint, "://["))
        zsock_set_ipv6 (req, 1);
    /* tcp://: the CURVE keys, if any, and a refused handshake said at once. */
    void *monitor = strncmp (endpoint, "tcp://", 6) == 0
                        ? fh_control_client_guard (zsys_init (), zsock_resolve (req))
                        : NULL;
    char *answer = NULL;
    bool sent = true;
    if (zmq_connect (zsock_resolve (req), endpoint) != 0) {
        snprintf (err, errlen, "%s: %s", endpoint, zmq_strerror (zmq_errno ()));
        sent = false;
    }
    for (size_t i = 0; sent && i < count; i++)
        if (zmq_send (zsock_resolve (req), frames[i].data, frames[i].size,
                      i + 1 < count ? ZMQ_SNDMORE : 0)
            < 0) {
            int why = zmq_errno ();
            bool probed = false;
            /* A handshake refused before the send (libzmq drops the pipe
               after a mechanism mismatch): the monitor says why. */
            if (!monitor || why != EAGAIN
                || !fh_control_client_refused (monitor, endpoint, &probed, err, errlen))
                snprintf (err, errlen, "%s: cannot send: %s", endpoint, zmq_strerror (why));
            sent = false;
        }
    if (sent && s_wait_answer (zsock_resolve (req), monitor, endpoint, timeout_ms, err, errlen)) {
        zmq_msg_t reply;
        zmq_msg_init (&reply);
        if (zmq_msg_recv (&reply, zsock_resolve (req), 0) < 0)
            snprintf (err, errlen, "%s: no answer within %d ms: is the hub running?", endpoint,
                      timeout_ms);
        else {
            size_t size = zmq_msg_size (&reply);
            answer = malloc (size + 1);
            if (answer) {
                memcpy (answer, zmq_msg_data (&reply), size);
                answer[size] = '\0';
            }
            else
                snprintf (err, errlen, "out of memory");
        }
        zmq_msg_close (&reply);
    }
    if (monitor) { /* see fh_control_guard_destroy */
        zmq_socket_monitor (zsock_resolve (req), NULL, 0);
        zmq_close (monitor);
    }
    zsock_destroy (&req);
    return answer;
}
