/*  control_curve - CURVE on a tcp:// control endpoint (control_curve:),
    both ends.

    The server side is the control socket itself: a ROUTER in CZMQ's
    context when control_curve is off (as before); with it, a ROUTER in a
    ZeroMQ context of its own, a CURVE server whose ZAP handler (zap.h,
    one per context: the bus's lives in CZMQ's) lets in the keys of
    control_curve.allow, allow_dir, client_key_file and the hub's own (its
    /metrics thread is a client), and a monitor that
    counts the handshakes refused before ZAP is asked (a plaintext
    client, a wrong server key). Every refusal is counted in the counter
    given (hub.auth_denied).

    The client side: the keys a command was given (--curve-key and
    --server-key, or the configuration's, see cli.h) are this process's
    control client keys, set once before any call; each call's socket
    gets them, and a monitor that turns a refused handshake into an error
    at once, instead of a wait for an answer that never comes.
*/
#ifndef FH_CONTROL_CURVE_H_INCLUDED
#define FH_CONTROL_CURVE_H_INCLUDED

#include "config.h"

#include <fanhub/sdk_curve.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fh_control_guard fh_control_guard_t;

/* The control endpoint's socket, not yet bound: NULL with one line in
   err when it cannot be made. denied and refused (connections shed past
   fh_fdlimit_control_budget) must outlive the guard. */
fh_control_guard_t *fh_control_guard_new (const fh_config_t *config, atomic_uint_fast64_t *denied,
                                          atomic_uint_fast64_t *refused, char *err, size_t errlen);
/* The ROUTER to bind and serve. */
void *fh_control_guard_router (fh_control_guard_t *self);
/* The monitor socket to poll for reading. */
void *fh_control_guard_monitor (fh_control_guard_t *self);
/* Reads the monitor's waiting events: counts the clients and sheds those
   past the budget (an ipc socket's file is renamed PATH.busy while the
   budget is full, in a private directory); counts the refused handshakes. */
void fh_control_guard_on_monitor (fh_control_guard_t *self);
/* Closes the sockets, then the ZAP handler and the context. Safe with
   NULL and twice. */
void fh_control_guard_destroy (fh_control_guard_t **self_p);

/* A client's keys, Z85 text. */
typedef struct {
    char public_key[FANHUB_CURVE_KEY_TEXT];
    char secret_key[FANHUB_CURVE_KEY_TEXT];
    char server_key[FANHUB_CURVE_KEY_TEXT]; /* the hub's control public key */
} fh_control_keys_t;

/* This process's control calls use keys from now on (NULL: plaintext
   again). Call before any thread makes a call. */
void fh_control_client_use_keys (const fh_control_keys_t *keys);
/* The hub's own calls (its /metrics thread) use the control socket's
   key pair, which its ZAP handler lets in; nothing without control_curve. */
void fh_control_client_use_own_keys (const fh_config_t *config);
/* Whether they are set. */
bool fh_control_client_curve (void);
/* Gives socket (a client, in context, not yet connected) the keys, when
   set, and a monitor of its handshakes: returns the monitor (a socket to
   poll and close with zmq_close), or NULL. */
void *fh_control_client_guard (void *context, void *socket);
/* After the monitor polled readable: true, with the reason in err, when
   the hub refused the handshake. *probed (false at first) is set once the
   hub's greeting has been read for its mechanism, which happens at most
   once a call. */
bool fh_control_client_refused (void *monitor, const char *endpoint, bool *probed, char *err,
                                size_t errlen);

#endif
