/*  control_path - where the control socket lives, and who may own it.

    The control socket carries emitted bodies, stats and reloads, so its
    ipc:// file must be reachable by its owner (and the group the operator
    chose) only, and a client must never talk to a socket another user put
    in its place. This module holds those checks, for both sides:

    - the hub, before it binds: the socket's directory is created 0700 when
      missing; an existing one must belong to the hub's user or root, and
      be writable by nobody else unless sticky (as /tmp is). The default
      private directory (/tmp/fanhub-UID, /run/fanhub-0 for root) must be the
      hub's own with no access for anybody else. A path that exists and is
      not a socket, or is a socket of another user, is refused: libzmq would
      unlink it silently. The bind then runs under umask 0117, so the
      socket is created 0660 with no window before its mode is set.
    - a client, before it sends anything: the path must be a socket owned
      by the client's own user, by root, or by the user named in the
      environment variable FANHUB_CONTROL_USER (a name or a number: for a
      member of the group of a hub that runs as its own user).
*/
#ifndef FH_CONTROL_PATH_H_INCLUDED
#define FH_CONTROL_PATH_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

/* The directory of the default control socket when neither
   RUNTIME_DIRECTORY nor XDG_RUNTIME_DIR is set: /run/fanhub-0 for root,
   /tmp/fanhub-UID otherwise; never the packages' /run/fanhub (the fanhub
   user's, 0750: systemd's RUNTIME_DIRECTORY for the units). Writes it
   to buf. */
void fh_control_path_private_dir (char *buf, size_t size);

/* The hub's side, before binding PATH (an ipc:// address without the
   scheme): makes or checks its directory and checks what is at PATH.
   *stale is set when PATH is an old socket of ours (the caller may ask it
   whether a hub still serves it). 0, or -1 with one line in err. */
int fh_control_path_prepare (const char *path, bool *stale, char *err, size_t errlen);

/* zmq_bind of endpoint on socket under umask 0117 (the socket file is
   created 0660). Returns zmq_bind's result. The umask is process-wide:
   a file another thread creates meanwhile is created no more open. */
int fh_control_path_bind (void *socket, const char *endpoint);

/* The endpoint the last successful fh_control_path_bind got, as libzmq's
   ZMQ_LAST_ENDPOINT says: a tcp port '*' (or 0) as chosen, so tests never
   pick a port and hope. One control socket per process; written by the
   binding thread before the hub's control start returns, read after. ""
   before any bind. */
const char *fh_control_path_bound (void);

/* The client's side: 0 when PATH is a socket owned by the caller's user,
   root or $FANHUB_CONTROL_USER; else -1 with one line in err saying whose
   it is (or, when the hub hides it as PATH.busy, that it is full). */
int fh_control_path_check_owner (const char *path, char *err, size_t errlen);

/* The client's side: while the hub hides PATH as PATH.busy (it has as
   many control clients as its descriptors allow, control_curve.c), waits
   for the name to come back, at most wait_ms. Returns the milliseconds
   waited. */
int fh_control_path_wait_shown (const char *path, int wait_ms);

#endif
