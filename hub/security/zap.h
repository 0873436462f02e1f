/*  zap - the hub's ZAP handler: who may complete a handshake on the bus.

    libzmq asks a ZAP handler (RFC 27, inproc://zeromq.zap.01 in the
    socket's context) about every handshake on a socket that has a ZAP
    domain or speaks CURVE as the server. This one answers for the domains
    it was given, each with its own policy:
      - CURVE: the client's public key must be in the allow list or in the
        certificate directory (a zcertstore, which re-reads the directory
        when it changes); other mechanisms are refused;
      - allow_ip: when not empty, the peer's address must be in one of
        these networks (cidr.h: "192.0.2.7", "10.0.0.0/8", "::1/128");
      - max_peers: when the domain's live peer count (kept by the socket's
        owner, from its monitor) is above the cap, the handshake is refused.
    A request for a domain it was not given (the control socket's, the
    connect side of a plaintext handshake: libzmq asks about those too
    once a handler exists) is let in; a malformed request is refused.

    Why not CZMQ's zauth: it cannot tell the hub how many it refused, nor
    cap the peers of an endpoint, and it lives in CZMQ's global context,
    while the relay plugin runs its sockets in a context of its own. This
    handler works in any context and uses zcertstore for directories.

    The handler is a thread of its own; it is created before the sockets
    it serves bind, and destroyed after they are closed.
*/
#ifndef FH_ZAP_H_INCLUDED
#define FH_ZAP_H_INCLUDED

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *domain;       /* ZMQ_ZAP_DOMAIN of the sockets it covers */
    int curve;                /* nonzero: clients must speak CURVE ... */
    const char *const *allow; /* ... with one of these Z85 keys */
    size_t allow_count;
    const char *allow_dir;       /* ... or a key of this zcert directory */
    const char *const *allow_ip; /* networks let in (cidr.h); none = any */
    size_t allow_ip_count;
    const atomic_int *peers;      /* live peers, or NULL */
    int max_peers;                /* refused above this, when peers is set */
    atomic_uint_fast64_t *denied; /* counts the refusals, or NULL */
} fh_zap_policy_t;

typedef struct fh_zap fh_zap_t;

/* Binds the handler in zmq_context and starts its thread. The policies
   (and what they point to) must outlive the handler. NULL with one line
   in err when it cannot (another handler holds the context's endpoint). */
fh_zap_t *fh_zap_new (void *zmq_context, const fh_zap_policy_t *policies, size_t count, char *err,
                      size_t errlen);
/* Stops the thread. Safe with NULL and twice. */
void fh_zap_destroy (fh_zap_t **self_p);

#endif
