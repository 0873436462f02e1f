/*  relay_zap - the relay's ZAP handler: which CURVE clients may subscribe.

    A bound relay socket with CURVE lets in clients whose public key is in
    its allow list or in its zcert directory (a zcertstore, which re-reads
    the directory when it changes); everything else is refused. libzmq asks
    the handler bound at inproc://zeromq.zap.01 of the socket's context, and
    the relay's sockets live in a context of its own, so CZMQ's zauth (bound
    in CZMQ's context, which the hub's own handler holds) cannot serve it.
    The handler runs as a CZMQ actor; it is made before the socket it
    serves binds, and destroyed after that socket is closed.
*/
#ifndef RELAY_ZAP_H_INCLUDED
#define RELAY_ZAP_H_INCLUDED

#include <stddef.h>

typedef struct relay_zap relay_zap_t;

/* Starts the handler in zmq_context for `domain`: allowed keys (Z85
   text) and/or the zcert directory allow_dir (or NULL). Everything is
   copied. NULL with one line in err when it cannot. */
relay_zap_t *relay_zap_new (void *zmq_context, const char *domain, const char *const *allow,
                            size_t allow_count, const char *allow_dir, char *err, size_t errlen);
/* Stops it. Safe with NULL. */
void relay_zap_destroy (relay_zap_t **self_p);

#endif
