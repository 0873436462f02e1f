/*  relay_zap - the relay's ZAP handler. See relay_zap.h. */
#include "relay_zap.h"

#include <czmq.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct relay_zap {
    zactor_t *actor;
    void *handler; /* REP on inproc://zeromq.zap.01 of the relay's context */
    char *domain;
    char **allow; /* Z85 keys */
    size_t allow_count;
    zcertstore_t *store;
};

/* True when the request (RFC 27: version, request id, domain, address,
   identity, mechanism, credentials) is a CURVE handshake of our domain
   with an allowed key. Other domains are not ours to judge: let in. */
static bool
s_allowed (relay_zap_t *self, zmsg_t *request, const char **why)
{
    zframe_t *version = zmsg_first (request);
    zmsg_next (request); /* request id */
    zframe_t *domain = zmsg_next (request);
    zmsg_next (request); /* address */
    zmsg_next (request); /* identity */
    zframe_t *mechanism = zmsg_next (request);
    zframe_t *key = zmsg_next (request);
    *why = "malformed ZAP request";
    if (!mechanism || !zframe_streq (version, "1.0"))
        return false;
    if (!zframe_streq (domain, self->domain))
        return true;
    *why = "CURVE required";
    if (!zframe_streq (mechanism, "CURVE") || !key || zframe_size (key) != 32)
        return false;
    char text[41];
    zmq_z85_encode (text, zframe_data (key), 32);
    *why = "key not allowed";
    for (size_t i = 0; i < self->allow_count; i++)
        if (strcmp (self->allow[i], text) == 0)
            return true;
    return self->store && zcertstore_lookup (self->store, text);
}

static void
s_answer (relay_zap_t *self)
{
    zmsg_t *request = zmsg_recv (self->handler);
    if (!request)
        return;
    const char *why = NULL;
    bool ok = s_allowed (self, request, &why);
    zmsg_first (request);
    zframe_t *id = zmsg_next (request);
    zmsg_t *reply = zmsg_new ();
    zmsg_addstr (reply, "1.0");
    if (id)
        zmsg_addmem (reply, zframe_data (id), zframe_size (id));
    else
        zmsg_addstr (reply, "");
    zmsg_addstr (reply, ok ? "200" : "400");
    zmsg_addstr (reply, ok ? "OK" : why);
    zmsg_addstr (reply, ""); /* user id */
    zmsg_addstr (reply, ""); /* metadata */
    zmsg_send (&reply, self->handler);
    zmsg_destroy (&request);
}

/* The actor: answers requests until told to stop ($TERM). */
static void
s_actor (zsock_t *pipe, void *args)
{
    relay_zap_t *self = args;
    zpoller_t *poller = zpoller_new (pipe, self->handler, NULL);
    zsock_signal (pipe, 0);
    while (poller) {
        void *which = zpoller_wait (poller, -1);
        if (which == self->handler)
            s_answer (self);
        else if (which == pipe || zpoller_terminated (poller))
            break; /* $TERM, or the context went */
    }
    zpoller_destroy (&poller);
}

relay_zap_t *
relay_zap_new (void *zmq_context, const char *domain, const char *const *allow, size_t allow_count,
               const char *allow_dir, char *err, size_t errlen)
{
    relay_zap_t *self = calloc (1, sizeof *self);
    bool copied = self && (self->domain = strdup (domain))
                  && (self->allow = calloc (allow_count + 1, sizeof *self->allow));
    for (size_t i = 0; copied && i < allow_count; i++, self->allow_count++)
        copied = (self->allow[i] = strdup (allow[i])) != NULL;
    if (!copied) {
        snprintf (err, errlen, "relay: out of memory");
        relay_zap_destroy (&self);
        return NULL;
    }
    if (allow_dir && !(self->store = zcertstore_new (allow_dir))) {
        snprintf (err, errlen, "relay: cannot read the certificates of %s", allow_dir);
        relay_zap_destroy (&self);
        return NULL;
    }
    int zero = 0;
    self->handler = zmq_socket (zmq_context, ZMQ_REP);
    if (!self->handler || zmq_setsockopt (self->handler, ZMQ_LINGER, &zero, sizeof zero) != 0
        || zmq_bind (self->handler, "inproc://zeromq.zap.01") != 0) {
        snprintf (err, errlen, "relay: cannot bind its ZAP handler: %s",
                  zmq_strerror (zmq_errno ()));
        relay_zap_destroy (&self);
        return NULL;
    }
    self->actor = zactor_new (s_actor, self);
    if (!self->actor) {
        snprintf (err, errlen, "relay: cannot start its ZAP handler");
        relay_zap_destroy (&self);
        return NULL;
    }
    return self;
}

void
relay_zap_destroy (relay_zap_t **self_p)
{
    relay_zap_t *self = *self_p;
    if (!self)
        return;
    zactor_destroy (&self->actor); /* joins the thread before its socket goes */
    if (self->handler)
        zmq_close (self->handler);
    zcertstore_destroy (&self->store);
    for (size_t i = 0; i < self->allow_count; i++)
        free (self->allow[i]);
    free (self->allow);
    free (self->domain);
    free (self);
    *self_p = NULL;
}
