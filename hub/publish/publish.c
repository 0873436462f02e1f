/*  publish - a consumer's publisher. See publish.h. */
#include "publish.h"

#include "clock.h"
#include "emit.h"
#include "enqueuer.h"
#include "fedmsg_sender.h"
#include "log.h"

#include <czmq.h>
#include <errno.h>
#include <fanhub/sdk.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_LINGER_MS 500 /* what the socket holds at close gets this long */
#define S_ENDPOINTS_MAX 1024

/* A message held while no subscriber is there: the bytes as they go out. */
typedef struct {
    char *topic;
    size_t topic_size;
    char *body;
    size_t body_size;
} s_held_t;

struct fh_publisher {
    char *name;
    fh_publish_config_t config; /* the lists and files are not kept: counts only */
    fh_strlist_t bind, connect; /* copies of the endpoints */
    pthread_mutex_t lock;       /* everything below but the counters */
    fh_fedmsg_sender_t *sender; /* envelope: fedmsg */
    zsock_t *sock;              /* XPUB; NULL before open and after close */
    zsock_t *local;             /* PUSH to the enqueuer's injection, once connected */
    char endpoints[S_ENDPOINTS_MAX];
    long subscriptions; /* topics subscribed to now, from XPUB's messages */
    s_held_t *held;     /* a ring: head, count, room (up to config.queue) */
    size_t held_head, held_count, held_room;
    fh_ratelimit_t fail_log;
    fh_consumer_counts_t counts; /* published, publish_failed (fh_count_add) */
};

static pthread_mutex_t s_local_lock = PTHREAD_MUTEX_INITIALIZER;
static char s_local_endpoint[256];

void
fh_publisher_set_local (const char *inject_endpoint)
{
    pthread_mutex_lock (&s_local_lock);
    snprintf (s_local_endpoint, sizeof s_local_endpoint, "%s",
              inject_endpoint ? inject_endpoint : "");
    pthread_mutex_unlock (&s_local_lock);
}

static int
s_copy_list (fh_strlist_t *to, const fh_strlist_t *from)
{
    to->items = from->count ? calloc (from->count, sizeof *to->items) : NULL;
    if (from->count && !to->items)
        return -1;
    for (size_t i = 0; i < from->count; i++) {
        if (!(to->items[i] = strdup (from->items[i])))
            return -1;
        to->count = i + 1;
    }
    return 0;
}

static void
s_free_list (fh_strlist_t *list)
{
    for (size_t i = 0; i < list->count; i++)
        free (list->items[i]);
    free (list->items);
    *list = (fh_strlist_t){0};
}

fh_publisher_t *
fh_publisher_new (const char *name, const fh_publish_config_t *config, char *err, size_t errlen)
{
    fh_publisher_t *self = calloc (1, sizeof *self);
    if (self)
        pthread_mutex_init (&self->lock, NULL);
    if (!self || !(self->name = strdup (name)) || s_copy_list (&self->bind, &config->bind) != 0
        || s_copy_list (&self->connect, &config->connect) != 0) {
        snprintf (err, errlen, "consumer '%s': publish: out of memory", name);
        fh_publisher_destroy (&self);
        return NULL;
    }
    self->config = *config;
    self->config.bind = self->bind;
    self->config.connect = self->connect;
    self->config.sign.cert = self->config.sign.key = NULL;
    char why[512];
    if (config->envelope == FH_ENVELOPE_FEDMSG
        && !(self->sender = fh_fedmsg_sender_new (config->sign.key, config->sign.cert, NULL, true,
                                                  why, sizeof why))) {
        snprintf (err, errlen, "consumer '%s': publish.sign: %s", name, why);
        fh_publisher_destroy (&self);
        return NULL;
    }
    return self;
}

/* Appends an endpoint to the list STATS shows. */
static void
s_note_endpoint (fh_publisher_t *self, const char *endpoint)
{
    size_t used = strlen (self->endpoints);
    snprintf (self->endpoints + used, sizeof self->endpoints - used, "%s%s", used ? " " : "",
              endpoint);
}

int
fh_publisher_open (fh_publisher_t *self, char *err, size_t errlen)
{
    if (self->bind.count + self->connect.count == 0)
        return 0; /* local: true only */
    zsock_t *sock = zsock_new (ZMQ_XPUB);
    if (!sock) {
        snprintf (err, errlen, "consumer '%s': publish: no socket: %s", self->name,
                  zmq_strerror (zmq_errno ()));
        return -1;
    }
    void *handle = zsock_resolve (sock);
    int hwm = self->config.queue > INT32_MAX ? INT32_MAX : (int) self->config.queue;
    int on = 1, linger = S_LINGER_MS;
    zmq_setsockopt (handle, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt (handle, ZMQ_XPUB_NODROP, &on, sizeof on);
    zmq_setsockopt (handle, ZMQ_LINGER, &linger, sizeof linger);
    /* IPv6 only for an IPv6 literal: else a '*' port would read back as
       tcp://[::ffff:127.0.0.1]:PORT. */
    for (size_t i = 0; i < self->bind.count + self->connect.count; i++) {
        const char *endpoint = i < self->bind.count ? self->bind.items[i]
                                                    : self->connect.items[i - self->bind.count];
        if (strncmp (endpoint, "tcp://[", 7) == 0)
            zmq_setsockopt (handle, ZMQ_IPV6, &on, sizeof on);
    }
    pthread_mutex_lock (&self->lock);
    self->endpoints[0] = '\0';
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < self->bind.count; i++) {
        char chosen[256] = "";
        size_t size = sizeof chosen;
        if (zmq_bind (handle, self->bind.items[i]) != 0) {
            snprintf (err, errlen, "consumer '%s': publish.bind: cannot bind %s: %s", self->name,
                      self->bind.items[i], zmq_strerror (zmq_errno ()));
            rc = -1;
        }
        else if (zmq_getsockopt (handle, ZMQ_LAST_ENDPOINT, chosen, &size) == 0 && chosen[0])
            s_note_endpoint (self, chosen);
        else
            s_note_endpoint (self, self->bind.items[i]);
    }
    for (size_t i = 0; rc == 0 && i < self->connect.count; i++) {
        if (zmq_connect (handle, self->connect.items[i]) != 0) {
            snprintf (err, errlen, "consumer '%s': publish.connect: cannot connect to %s: %s",
                      self->name, self->connect.items[i], zmq_strerror (zmq_errno ()));
            rc = -1;
        }
        else
            s_note_endpoint (self, self->connect.items[i]);
    }
    if (rc == 0) {
        self->sock = sock;
        fh_info ("consumer '%s': publishing on %s", self->name, self->endpoints);
    }
    else {
        self->endpoints[0] = '\0';
        zsock_destroy (&sock);
    }
    pthread_mutex_unlock (&self->lock);
    return rc;
}

/* Under the lock: the subscriptions that arrived. XPUB tells a topic's
   first subscriber (1) and its last leaving (0), so the count is of
   topics someone subscribes to. */
static void
s_read_subscriptions (fh_publisher_t *self)
{
    void *handle = zsock_resolve (self->sock);
    unsigned char event[256];
    int n;
    while ((n = zmq_recv (handle, event, sizeof event, ZMQ_DONTWAIT)) >= 0)
        if (n > 0 && event[0] == 1)
            self->subscriptions++;
        else if (n > 0 && event[0] == 0 && self->subscriptions > 0)
            self->subscriptions--;
}

/* Under the lock: sends one message; false on EAGAIN (a full pipe). */
static bool
s_send (fh_publisher_t *self, const char *topic, size_t topic_size, const void *body,
        size_t body_size)
{
    void *handle = zsock_resolve (self->sock);
    if (zmq_send (handle, topic, topic_size, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return false;
    /* The rest of a multipart message follows its first frame. */
    zmq_send (handle, body, body_size, 0);
    return true;
}

/* Under the lock: whether messages wait for a subscriber now. */
static bool
s_must_hold (fh_publisher_t *self)
{
    return self->held_count || (self->connect.count && self->subscriptions == 0);
}

/* Under the lock: sends what is held while a subscriber is there. */
static void
s_flush (fh_publisher_t *self)
{
    if (!self->sock || !self->held_count)
        return;
    s_read_subscriptions (self);
    size_t sent = 0;
    while (self->held_count && self->subscriptions > 0) {
        s_held_t *held = &self->held[self->held_head];
        if (!s_send (self, held->topic, held->topic_size, held->body, held->body_size))
            break; /* full: the rest waits */
        free (held->topic);
        free (held->body);
        self->held_head = (self->held_head + 1) % self->held_room;
        self->held_count--;
        sent++;
    }
    if (sent)
        fh_info ("consumer '%s': publish: %zu held messages sent, %zu still held", self->name, sent,
                 self->held_count);
}

/* Under the lock: keeps a message for later; false when the queue is full. */
static bool
s_hold (fh_publisher_t *self, const char *topic, size_t topic_size, const void *body,
        size_t body_size)
{
    if (self->held_count >= self->config.queue)
        return false;
    if (self->held_count == self->held_room) {
        size_t room = self->held_room ? self->held_room * 2 : 64;
        room = room > self->config.queue ? self->config.queue : room;
        s_held_t *grown = malloc (room * sizeof *grown);
        if (!grown)
            return false;
        for (size_t i = 0; i < self->held_count; i++)
            grown[i] = self->held[(self->held_head + i) % self->held_room];
        free (self->held);
        self->held = grown;
        self->held_head = 0;
        self->held_room = room;
    }
    s_held_t item = {malloc (topic_size + 1), topic_size, malloc (body_size + 1), body_size};
    if (!item.topic || !item.body) {
        free (item.topic);
        free (item.body);
        return false;
    }
    memcpy (item.topic, topic, topic_size);
    memcpy (item.body, body, body_size);
    self->held[(self->held_head + self->held_count++) % self->held_room] = item;
    return true;
}

/* Under the lock: local: true, the message to this hub's consumers
   through the enqueuer's injection socket, as an input of the hub's own
   (counted received, not published again on bus.publish). */
static bool
s_inject (fh_publisher_t *self, const char *topic, size_t topic_size, const void *body,
          size_t body_size, const char **why)
{
    char endpoint[sizeof s_local_endpoint];
    pthread_mutex_lock (&s_local_lock);
    memcpy (endpoint, s_local_endpoint, sizeof endpoint);
    pthread_mutex_unlock (&s_local_lock);
    *why = "the hub's enqueuer is not running (not yet, or stopping)";
    if (!endpoint[0])
        return false; /* what it would not read would never be freed */
    if (!self->local) {
        zsock_t *push = zsock_new (ZMQ_PUSH);
        if (!push)
            return false;
        zsock_set_sndhwm (push,
                          (int) (self->config.queue > INT32_MAX ? INT32_MAX : self->config.queue));
        zsock_set_linger (push, 0);
        if (zsock_connect (push, "%s", endpoint) != 0) {
            zsock_destroy (&push);
            return false;
        }
        self->local = push;
    }
    fh_emit_t *emit = fh_emit_new (1);
    *why = "out of memory";
    if (!emit)
        return false;
    fh_inject_t header = {emit, false, true};
    void *handle = zsock_resolve (self->local);
    if (zmq_send (handle, &header, sizeof header, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        *why = "the hub's enqueuer takes no more now (publish.queue messages wait for it)";
        fh_emit_abandon (emit); /* the message's reference */
        fh_emit_unref (&emit);
        return false;
    }
    zmq_send (handle, topic, topic_size, ZMQ_SNDMORE);
    zmq_send (handle, body, body_size, 0);
    fh_emit_unref (&emit); /* the message keeps its own */
    return true;
}

/* Counts one refusal and says why, rate-limited. Under the lock. */
static int
s_refuse (fh_publisher_t *self, const char *topic, const char *why)
{
    fh_count_add (&self->counts.publish_failed, 1);
    fh_log_limited (&self->fail_log, FANHUB_LOG_WARNING,
                    "consumer '%s': publish: a message on '%.200s' is dropped: %s", self->name,
                    topic, why);
    return -1;
}

/* Under the lock: the message, wrapped as publish: says, to its ends. */
static int
s_publish_locked (fh_publisher_t *self, const char *topic, const void *body, size_t size)
{
    size_t topic_size = strlen (topic);
    char id[FH_FEDMSG_ID_SIZE] = "";
    char why[512];
    if (self->sender
        && fh_fedmsg_sender_wrap (self->sender, topic, topic_size, body, size, &body, &size, id,
                                  why, sizeof why)
               != 0)
        return s_refuse (self, topic, why);
    if (!self->sender && fh_log_enabled (FANHUB_LOG_DEBUG))
        fh_fedmsg_msg_id (body, size, id, sizeof id);
    if (self->bind.count + self->connect.count) {
        if (!self->sock)
            return s_refuse (self, topic, "the consumer is not running");
        s_flush (self);
        if (s_must_hold (self)) {
            s_read_subscriptions (self);
            if (!self->held_count && self->subscriptions > 0) {
                if (!s_send (self, topic, topic_size, body, size))
                    return s_refuse (self, topic, "the subscriber's queue is full (publish.queue)");
            }
            else if (!s_hold (self, topic, topic_size, body, size))
                return s_refuse (self, topic,
                                 "no subscriber, and publish.queue messages are held already");
        }
        else if (!s_send (self, topic, topic_size, body, size))
            return s_refuse (self, topic, "the subscriber's queue is full (publish.queue)");
    }
    const char *local_why = NULL;
    if (self->config.local && !s_inject (self, topic, topic_size, body, size, &local_why))
        return s_refuse (self, topic, local_why);
    fh_count_add (&self->counts.published, 1);
    fh_debug ("consumer '%s': published on '%s'%s%s", self->name, topic, id[0] ? " msg_id " : "",
              id);
    return 0;
}

int
fh_publisher_send (fh_publisher_t *self, const char *topic, const void *body, size_t size)
{
    if (!topic || !*topic || !fanhub_utf8_valid (topic, strlen (topic))) {
        fh_count_add (&self->counts.publish_failed, 1);
        pthread_mutex_lock (&self->lock);
        fh_log_limited (&self->fail_log, FANHUB_LOG_WARNING,
                        "consumer '%s': publish: a message is dropped: its topic is %s", self->name,
                        topic && *topic ? "not UTF-8" : "empty");
        pthread_mutex_unlock (&self->lock);
        return -1;
    }
    if (!body && size)
        size = 0;
    pthread_mutex_lock (&self->lock);
    int rc = s_publish_locked (self, topic, body ? body : "", size);
    pthread_mutex_unlock (&self->lock);
    return rc;
}

void
fh_publisher_tick (fh_publisher_t *self)
{
    pthread_mutex_lock (&self->lock);
    if (self->sock) {
        s_read_subscriptions (self);
        s_flush (self);
    }
    pthread_mutex_unlock (&self->lock);
}

const fh_consumer_counts_t *
fh_publisher_tally (const fh_publisher_t *self)
{
    return &self->counts;
}

void
fh_publisher_endpoints (fh_publisher_t *self, char *buf, size_t size)
{
    pthread_mutex_lock (&self->lock);
    snprintf (buf, size, "%s", self->endpoints);
    pthread_mutex_unlock (&self->lock);
}

void
fh_publisher_destroy (fh_publisher_t **self_p)
{
    fh_publisher_t *self = *self_p;
    if (!self)
        return;
    pthread_mutex_lock (&self->lock);
    if (self->sock)
        s_flush (self);
    if (self->held_count) {
        fh_warning ("consumer '%s': publish: %zu held messages were never sent (no "
                    "subscriber came)",
                    self->name, self->held_count);
        fh_count_add (&self->counts.publish_failed, self->held_count);
    }
    for (size_t i = 0; i < self->held_count; i++) {
        s_held_t *held = &self->held[(self->held_head + i) % self->held_room];
        free (held->topic);
        free (held->body);
    }
    zsock_destroy (&self->sock);
    zsock_destroy (&self->local);
    pthread_mutex_unlock (&self->lock);
    pthread_mutex_destroy (&self->lock);
    free (self->held);
    fh_fedmsg_sender_destroy (&self->sender);
    s_free_list (&self->bind);
    s_free_list (&self->connect);
    free (self->name);
    free (self);
    *self_p = NULL;
}
