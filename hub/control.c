/*  control - the hub's control socket. See control.h. */
#include "control.h"

#include "clock.h"
#include "log.h"
#include "collectd_push.h"
#include "moksha.h"
#include "stats.h"

#include <czmq.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TICK_MS 1000
#define MAX_ENVELOPE_FRAMES 16 /* ROUTER identity, delimiter, proxies */

struct fh_control {
    fh_hub_t *hub;
    zactor_t *actor;
    char *ipc_path; /* to remove at the end, when ipc:// */
    char start_error[512];
    atomic_bool setup_done; /* release: start_error is final */
    atomic_bool bound;      /* the endpoint is ours: remove an ipc file */
};

typedef struct {
    fh_control_t *control;
    fh_stats_t *stats;
} s_state_t;

static char *
s_handle (s_state_t *state, const char *command, size_t size)
{
    if (size == 4 && memcmp (command, "PING", 4) == 0)
        return strdup ("PONG");
    if (size == 5 && memcmp (command, "STATS", 5) == 0) {
        json_t *stats = fh_stats_json (state->stats);
        char *text = stats ? json_dumps (stats, JSON_COMPACT) : NULL;
        json_decref (stats);
        return text ? text : strdup ("ERROR out of memory");
    }
    char reply[256];
    if (size == 0)
        snprintf (reply, sizeof reply, "ERROR empty command (commands: PING, STATS)");
    else if (size > FH_CONTROL_MAX_COMMAND)
        snprintf (reply, sizeof reply, "ERROR command of %zu bytes, at most %d", size,
                  FH_CONTROL_MAX_COMMAND);
    else {
        /* Echo only printable ASCII of the command, and not much of it. */
        char shown[33];
        size_t n = 0;
        for (size_t i = 0; i < size && n < sizeof shown - 1; i++)
            shown[n++] = command[i] >= 0x20 && command[i] < 0x7f ? command[i] : '?';
        shown[n] = '\0';
        snprintf (reply, sizeof reply, "ERROR unknown command '%s%s' (commands: PING, STATS)",
                  shown, size > n ? "..." : "");
    }
    return strdup (reply);
}

/* Reads one request off the ROUTER and answers it. The envelope is every
   frame up to and including an empty delimiter (REQ clients), or just the
   identity (DEALER clients); what follows must be one command frame. */
static void
s_serve_one (s_state_t *state, void *router)
{
    enum { CAP = MAX_ENVELOPE_FRAMES + 2 };
    zmq_msg_t frames[CAP], overflow;
    size_t count = 0;
    bool more = true, too_many = false;
    while (more) {
        zmq_msg_t *frame = count < CAP ? &frames[count] : &overflow;
        zmq_msg_init (frame);
        if (zmq_msg_recv (frame, router, count == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close (frame);
            break;
        }
        more = zmq_msg_more (frame);
        if (count < CAP)
            count++;
        else {
            too_many = true;
            zmq_msg_close (frame);
        }
    }
    if (count == 0)
        return;
    /* Envelope: identity, then up to the first empty frame if there is one. */
    size_t body = 1;
    for (size_t i = 1; i < count; i++)
        if (zmq_msg_size (&frames[i]) == 0) {
            body = i + 1;
            break;
        }
    char *reply;
    if (too_many || count - body > 1)
        reply = strdup ("ERROR a request is one command frame");
    else if (count == body)
        reply = s_handle (state, "", 0);
    else
        reply = s_handle (state, zmq_msg_data (&frames[body]), zmq_msg_size (&frames[body]));
    /* The ROUTER drops replies to peers that are gone: never blocks. */
    for (size_t i = 0; i < body; i++)
        zmq_msg_send (&frames[i], router, ZMQ_SNDMORE);
    if (reply)
        zmq_send (router, reply, strlen (reply), 0);
    else
        zmq_send (router, "ERROR out of memory", 19, 0);
    free (reply);
    for (size_t i = 0; i < count; i++)
        zmq_msg_close (&frames[i]);
}

static void
s_control_actor (zsock_t *pipe, void *args)
{
    fh_control_t *self = args;
    const fh_config_t *config = fh_hub_config (self->hub);
    s_state_t state = {self, fh_stats_new (self->hub)};
    zsock_t *router = zsock_new (ZMQ_ROUTER);
    fh_moksha_t *moksha = NULL;
    fh_collectd_push_t *push = NULL;
    if (!state.stats || !router)
        snprintf (self->start_error, sizeof self->start_error, "control: out of memory");
    else {
        zsock_set_linger (router, 0);
        zsock_set_router_mandatory (router, 0);
        if (zmq_bind (zsock_resolve (router), config->control) != 0)
            snprintf (self->start_error, sizeof self->start_error,
                      "control: cannot bind %s: %s", config->control,
                      zmq_strerror (zmq_errno ()));
        else if (self->ipc_path && chmod (self->ipc_path, 0660) != 0)
            snprintf (self->start_error, sizeof self->start_error,
                      "control: cannot set mode 0660 on %s: %s", self->ipc_path,
                      strerror (errno));
        else {
            atomic_store_explicit (&self->bound, true, memory_order_relaxed);
            moksha = fh_moksha_new (self->hub, self->start_error, sizeof self->start_error);
            push = fh_collectd_push_new (config);
        }
    }
    /* The pipe hands over no memory ordering that TSan (or C11) sees. */
    atomic_store_explicit (&self->setup_done, true, memory_order_release);
    zsock_signal (pipe, 0);

    zmq_pollitem_t items[] = {
        {zsock_resolve (pipe), 0, ZMQ_POLLIN, 0},
        {router ? zsock_resolve (router) : NULL, 0, ZMQ_POLLIN, 0},
    };
    int item_count = self->start_error[0] ? 1 : 2;
    int64_t next_tick = fh_clock_mono_ns () + TICK_MS * INT64_C (1000000);
    while (true) {
        int64_t wait_ms = (next_tick - fh_clock_mono_ns ()) / 1000000;
        if (zmq_poll (items, item_count, wait_ms < 0 ? 0 : (long) wait_ms) < 0) {
            if (zmq_errno () == EINTR)
                continue;
            break;
        }
        if (items[0].revents & ZMQ_POLLIN) {
            char *command = zstr_recv (pipe);
            bool term = !command || streq (command, "$TERM");
            zstr_free (&command);
            if (term)
                break;
        }
        if (item_count > 1 && (items[1].revents & ZMQ_POLLIN))
            s_serve_one (&state, zsock_resolve (router));
        int64_t now = fh_clock_mono_ns ();
        if (now >= next_tick && state.stats) {
            fh_stats_tick (state.stats, now);
            fh_moksha_tick (moksha, now);
            fh_collectd_push_tick (push, state.stats, now);
            for (size_t i = 0; i < fh_hub_consumer_count (self->hub); i++)
                fh_consumer_check_stuck (fh_hub_consumer (self->hub, i), now);
            next_tick = now + TICK_MS * INT64_C (1000000);
        }
    }
    fh_collectd_push_destroy (&push);
    fh_moksha_destroy (&moksha);
    zsock_destroy (&router);
    fh_stats_destroy (&state.stats);
}

/* For ipc://: refuses a path another hub serves, and makes its directory. */
static int
s_prepare_ipc (fh_control_t *self, const char *endpoint, char *err, size_t errlen)
{
    self->ipc_path = strdup (endpoint + strlen ("ipc://"));
    if (!self->ipc_path) {
        snprintf (err, errlen, "control: out of memory");
        return -1;
    }
    struct stat st;
    if (stat (self->ipc_path, &st) == 0) {
        char why[256];
        char *answer = fh_control_call (endpoint, "PING", 300, why, sizeof why);
        bool taken = answer && strcmp (answer, "PONG") == 0;
        free (answer);
        if (taken) {
            snprintf (err, errlen,
                      "control: %s is served by another running hub; give this one "
                      "another `control:` (or a `name:`)", endpoint);
            free (self->ipc_path);
            self->ipc_path = NULL; /* not ours to remove */
            return -1;
        }
    }
    char dir[PATH_MAX];
    snprintf (dir, sizeof dir, "%s", self->ipc_path);
    char *slash = strrchr (dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if (mkdir (dir, 0750) != 0 && errno != EEXIST) {
            snprintf (err, errlen, "control: cannot create directory %s: %s", dir,
                      strerror (errno));
            return -1;
        }
    }
    return 0;
}

fh_control_t *
fh_control_new (fh_hub_t *hub, char *err, size_t errlen)
{
    fh_control_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "control: out of memory");
        return NULL;
    }
    self->hub = hub;
    const char *endpoint = fh_hub_config (hub)->control;
    if (strncmp (endpoint, "ipc://", 6) == 0 && s_prepare_ipc (self, endpoint, err, errlen)) {
        fh_control_destroy (&self);
        return NULL;
    }
    self->actor = zactor_new (s_control_actor, self);
    if (self->actor)
        (void) atomic_load_explicit (&self->setup_done, memory_order_acquire);
    if (!self->actor || self->start_error[0]) {
        snprintf (err, errlen, "%s", self->actor ? self->start_error : "control: out of memory");
        if (!atomic_load (&self->bound)) {
            free (self->ipc_path); /* the bind failed: the file is not ours */
            self->ipc_path = NULL;
        }
        fh_control_destroy (&self);
        return NULL;
    }
    return self;
}

void
fh_control_destroy (fh_control_t **self_p)
{
    fh_control_t *self = *self_p;
    if (!self)
        return;
    zactor_destroy (&self->actor);
    if (self->ipc_path)
        unlink (self->ipc_path);
    free (self->ipc_path);
    free (self);
    *self_p = NULL;
}

char *
fh_control_call (const char *endpoint, const char *command, int timeout_ms, char *err,
                 size_t errlen)
{
    if (strncmp (endpoint, "ipc://", 6) == 0 && access (endpoint + 6, F_OK) != 0) {
        snprintf (err, errlen, "%s: %s: is the hub running, with this control endpoint?",
                  endpoint, strerror (errno));
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
    char *answer = NULL;
    if (zmq_connect (zsock_resolve (req), endpoint) != 0)
        snprintf (err, errlen, "%s: %s", endpoint, zmq_strerror (zmq_errno ()));
    else if (zmq_send (zsock_resolve (req), command, strlen (command), 0) < 0)
        snprintf (err, errlen, "%s: cannot send: %s", endpoint, zmq_strerror (zmq_errno ()));
    else {
        zmq_msg_t reply;
        zmq_msg_init (&reply);
        if (zmq_msg_recv (&reply, zsock_resolve (req), 0) < 0)
            snprintf (err, errlen, "%s: no answer within %d ms: is the hub running?",
                      endpoint, timeout_ms);
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
    zsock_destroy (&req);
    return answer;
}
