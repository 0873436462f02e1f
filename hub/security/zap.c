/*  zap - the hub's ZAP handler. See zap.h. */
#include "zap.h"

#include "cidr.h"
#include "thread.h"

#include <czmq.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZAP_FRAMES_MAX 8 /* version, id, domain, address, identity, mechanism, key */

struct fh_zap {
    void *context;
    void *handler; /* REP on inproc://zeromq.zap.01 */
    void *stop_in; /* PAIR: the thread's end of the stop pipe */
    void *stop_out;
    const fh_zap_policy_t *policies;
    size_t count;
    zcertstore_t **stores; /* per policy, when it has allow_dir */
    fh_cidr_t **networks;  /* per policy: its allow_ip, parsed */
    fh_thread_t thread;
};

static const fh_zap_policy_t *
s_policy (fh_zap_t *self, const char *domain, size_t *index)
{
    for (size_t i = 0; i < self->count; i++)
        if (strcmp (self->policies[i].domain, domain) == 0) {
            *index = i;
            return &self->policies[i];
        }
    return NULL;
}

/* The answer to one request: NULL to let it in, else the reason; *policy_p
   is the domain's policy, when it has one. */
static const char *
s_decide (fh_zap_t *self, zmq_msg_t *frames, size_t count, const fh_zap_policy_t **policy_p)
{
    if (count < 6 || zmq_msg_size (&frames[0]) != 3
        || memcmp (zmq_msg_data (&frames[0]), "1.0", 3) != 0)
        return "malformed ZAP request";
    char domain[256], address[256], mechanism[16];
    const zmq_msg_t *text[] = {&frames[2], &frames[3], &frames[5]};
    char *out[] = {domain, address, mechanism};
    size_t room[] = {sizeof domain, sizeof address, sizeof mechanism};
    for (int i = 0; i < 3; i++) {
        size_t n = zmq_msg_size (text[i]);
        if (n >= room[i])
            return "malformed ZAP request";
        memcpy (out[i], zmq_msg_data ((zmq_msg_t *) text[i]), n);
        out[i][n] = '\0';
    }
    size_t index = 0;
    const fh_zap_policy_t *policy = s_policy (self, domain, &index);
    *policy_p = policy;
    if (!policy)
        return NULL; /* not ours to judge */
    if (policy->allow_ip_count) {
        bool listed = false;
        for (size_t i = 0; i < policy->allow_ip_count && !listed; i++)
            listed = fh_cidr_match (&self->networks[index][i], address);
        if (!listed)
            return "address not allowed";
    }
    if (policy->peers && atomic_load (policy->peers) > policy->max_peers)
        return "too many peers";
    if (!policy->curve)
        return NULL;
    if (strcmp (mechanism, "CURVE") != 0 || count < 7 || zmq_msg_size (&frames[6]) != 32)
        return "CURVE required";
    char key[41];
    zmq_z85_encode (key, zmq_msg_data (&frames[6]), 32);
    for (size_t i = 0; i < policy->allow_count; i++)
        if (strcmp (policy->allow[i], key) == 0)
            return NULL;
    if (self->stores[index] && zcertstore_lookup (self->stores[index], key))
        return NULL;
    return "key not allowed";
}

static void
s_answer (fh_zap_t *self, zmq_msg_t *frames, size_t count)
{
    const fh_zap_policy_t *policy = NULL;
    const char *why = s_decide (self, frames, count, &policy);
    if (why && policy && policy->denied)
        atomic_fetch_add (policy->denied, 1);
    /* version, request id (echoed), status code, text, user id, metadata */
    zmq_send (self->handler, "1.0", 3, ZMQ_SNDMORE);
    if (count > 1)
        zmq_send (self->handler, zmq_msg_data (&frames[1]), zmq_msg_size (&frames[1]), ZMQ_SNDMORE);
    else
        zmq_send (self->handler, "", 0, ZMQ_SNDMORE);
    zmq_send (self->handler, why ? "400" : "200", 3, ZMQ_SNDMORE);
    zmq_send (self->handler, why ? why : "OK", strlen (why ? why : "OK"), ZMQ_SNDMORE);
    zmq_send (self->handler, "", 0, ZMQ_SNDMORE);
    zmq_send (self->handler, "", 0, 0);
}

static void *
s_run (void *args)
{
    fh_zap_t *self = args;
    zmq_pollitem_t items[] = {
        {self->stop_in, 0, ZMQ_POLLIN, 0},
        {self->handler, 0, ZMQ_POLLIN, 0},
    };
    while (true) {
        if (zmq_poll (items, 2, -1) < 0) {
            if (zmq_errno () == EINTR)
                continue;
            break; /* ETERM */
        }
        if (items[0].revents & ZMQ_POLLIN)
            break;
        if (!(items[1].revents & ZMQ_POLLIN))
            continue;
        zmq_msg_t frames[ZAP_FRAMES_MAX + 1];
        size_t count = 0;
        bool more = true;
        while (more) {
            zmq_msg_t *frame = &frames[count < ZAP_FRAMES_MAX ? count : ZAP_FRAMES_MAX];
            zmq_msg_init (frame);
            if (zmq_msg_recv (frame, self->handler, 0) < 0) {
                zmq_msg_close (frame);
                break;
            }
            more = zmq_msg_more (frame);
            if (count < ZAP_FRAMES_MAX)
                count++;
            else
                zmq_msg_close (frame);
        }
        if (!more)
            s_answer (self, frames, count);
        for (size_t i = 0; i < count; i++)
            zmq_msg_close (&frames[i]);
    }
    return NULL;
}

/* A policy's allow_ip entries as networks (cidr.h); the configuration
   checked them already, so a bad one here is refused all the same. */
static int
s_parse_networks (fh_zap_t *self, size_t index, char *err, size_t errlen)
{
    const fh_zap_policy_t *policy = &self->policies[index];
    if (!policy->allow_ip_count)
        return 0;
    self->networks[index] = calloc (policy->allow_ip_count, sizeof (fh_cidr_t));
    if (!self->networks[index]) {
        snprintf (err, errlen, "ZAP handler: out of memory");
        return -1;
    }
    for (size_t i = 0; i < policy->allow_ip_count; i++) {
        const char *why;
        if (fh_cidr_parse (policy->allow_ip[i], &self->networks[index][i], &why) != 0) {
            snprintf (err, errlen, "ZAP handler: allow_ip '%s': %s", policy->allow_ip[i], why);
            return -1;
        }
    }
    return 0;
}

fh_zap_t *
fh_zap_new (void *zmq_context, const fh_zap_policy_t *policies, size_t count, char *err,
            size_t errlen)
{
    fh_zap_t *self = calloc (1, sizeof *self);
    if (!self || !(self->stores = calloc (count + 1, sizeof *self->stores))
        || !(self->networks = calloc (count + 1, sizeof *self->networks))) {
        if (self)
            free (self->stores);
        free (self);
        snprintf (err, errlen, "ZAP handler: out of memory");
        return NULL;
    }
    self->context = zmq_context;
    self->policies = policies;
    self->count = count;
    for (size_t i = 0; i < count; i++)
        if (s_parse_networks (self, i, err, errlen) != 0) {
            fh_zap_destroy (&self);
            return NULL;
        }
    for (size_t i = 0; i < count; i++)
        if (policies[i].allow_dir) {
            self->stores[i] = zcertstore_new (policies[i].allow_dir);
            if (!self->stores[i]) {
                snprintf (err, errlen, "ZAP handler: cannot read the certificates of %s",
                          policies[i].allow_dir);
                fh_zap_destroy (&self);
                return NULL;
            }
        }
    char stop_endpoint[64];
    snprintf (stop_endpoint, sizeof stop_endpoint, "inproc://fanhub-zap-stop-%p", (void *) self);
    self->handler = zmq_socket (zmq_context, ZMQ_REP);
    self->stop_in = zmq_socket (zmq_context, ZMQ_PAIR);
    self->stop_out = zmq_socket (zmq_context, ZMQ_PAIR);
    int zero = 0;
    if (self->handler)
        zmq_setsockopt (self->handler, ZMQ_LINGER, &zero, sizeof zero);
    if (!self->handler || !self->stop_in || !self->stop_out
        || zmq_bind (self->handler, "inproc://zeromq.zap.01") != 0
        || zmq_bind (self->stop_in, stop_endpoint) != 0
        || zmq_connect (self->stop_out, stop_endpoint) != 0) {
        snprintf (err, errlen, "ZAP handler: cannot bind inproc://zeromq.zap.01: %s",
                  zmq_strerror (zmq_errno ()));
        fh_zap_destroy (&self);
        return NULL;
    }
    if (fh_thread_start (&self->thread, "fh:zap", s_run, self, err, errlen) != 0)
        fh_zap_destroy (&self);
    return self;
}

void
fh_zap_destroy (fh_zap_t **self_p)
{
    fh_zap_t *self = *self_p;
    if (!self)
        return;
    if (fh_thread_started (&self->thread))
        zmq_send (self->stop_out, "", 0, 0);
    fh_thread_join (&self->thread);
    if (self->handler)
        zmq_close (self->handler);
    if (self->stop_in)
        zmq_close (self->stop_in);
    if (self->stop_out)
        zmq_close (self->stop_out);
    for (size_t i = 0; i < self->count; i++) {
        zcertstore_destroy (&self->stores[i]);
        free (self->networks[i]);
    }
    free (self->stores);
    free (self->networks);
    free (self);
    *self_p = NULL;
}
