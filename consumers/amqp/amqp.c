/*  amqp - the shipped consumer that bridges the bus into RabbitMQ (AMQP
    0-9-1, librabbitmq), the broker fedora-messaging runs on.

    Each message is published to an exchange (default amq.topic) with the
    topic as routing key (rewritten by topic_prefix, as the relay does) and
    the body byte for byte, persistent (delivery_mode 2), with a header
    fanhub_seq (the hub's sequence number, a signed 64-bit integer) and
    content_type application/json when the body is a JSON object or array.

    Done means confirmed. consume copies the message, hands it to the link
    thread (link.c) and answers FANHUB_PENDING (ABI 1.1); the link publishes
    it in confirm mode and completes it with host->complete when the broker
    confirms it: FANHUB_OK on basic.ack, FANHUB_RETRY on basic.nack or when
    the connection is lost before the confirm. Confirms are pipelined: up to
    the consumer's max_pending messages are open at once, never one round
    trip per message. While the link is not connected consume answers
    FANHUB_RETRY at once, and the consumer's retry: setting decides how long
    the hub keeps trying (docs/plugins/amqp.md).

    A topic longer than 255 bytes (after rewriting) cannot be a routing key:
    that message is answered FANHUB_FAIL (a dead letter), logged at most
    once every 10 s.

    Options: the table in options.c (`fanhub plugins --options amqp`) and
    docs/plugins/amqp.md. consume is thread-safe
    (the hand-off is locked), so workers: N with order_by works; a key's
    next message then waits for its predecessor's confirm.
*/
#include "bridge.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AMQP_REJECT_LOG_NS (10 * INT64_C (1000000000))

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    bridge_options_t opts;
    bridge_counters_t counters;
    bridge_link_t *link;
    pthread_mutex_t reject_lock; /* guards the rate limit of reject lines */
    int64_t reject_log_ns;
    uint64_t rejects_unlogged;
    atomic_uint_fast64_t rejected;
} amqp_state_t;

/* True when body is a JSON object or array: it starts (after white space)
   with '{' or '[', and jansson reads the whole of it (RFC 8259: \u0000 too,
   as Python's json reads it). Other JSON texts (a bare number or
   string) get no content_type, as other bodies. */
static bool
s_is_json (const char *body, size_t size)
{
    size_t i = 0;
    while (i < size && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r'))
        i++;
    if (i == size || (body[i] != '{' && body[i] != '['))
        return false;
    json_error_t error;
    json_t *root = json_loadb (body, size, JSON_ALLOW_NUL, &error);
    json_decref (root);
    return root != NULL;
}

static int64_t
s_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A message that can never be published: FAIL, logged at most once every
   AMQP_REJECT_LOG_NS. */
static fanhub_result_t
s_reject (amqp_state_t *self, uint64_t seq, const char *why)
{
    atomic_fetch_add (&self->rejected, 1);
    pthread_mutex_lock (&self->reject_lock);
    int64_t now = s_now_ns ();
    if (self->reject_log_ns && now - self->reject_log_ns < AMQP_REJECT_LOG_NS)
        self->rejects_unlogged++;
    else {
        self->host->log (self->ctx, FANHUB_LOG_WARNING,
                         "message %llu cannot be published: %s (%llu more not logged)",
                         (unsigned long long) seq, why,
                         (unsigned long long) self->rejects_unlogged);
        self->reject_log_ns = now;
        self->rejects_unlogged = 0;
    }
    pthread_mutex_unlock (&self->reject_lock);
    return FANHUB_FAIL;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    amqp_state_t *self = state;
    const fanhub_host_t *host = self->host;
    fanhub_bytes_t topic = host->msg_topic (msg);
    fanhub_bytes_t body = host->msg_body (msg);
    uint64_t seq = host->msg_seq (msg);

    /* The routing key is head + rest: the topic, or `to` and what follows
       `from`. */
    const char *head = topic.data, *rest = "";
    size_t head_size = topic.size, rest_size = 0;
    const bridge_options_t *o = &self->opts;
    if (o->rewrite && topic.size >= o->from_len && memcmp (topic.data, o->from, o->from_len) == 0) {
        head = o->to;
        head_size = o->to_len;
        rest = (const char *) topic.data + o->from_len;
        rest_size = topic.size - o->from_len;
    }
    if (head_size + rest_size > BRIDGE_SHORTSTR_MAX)
        return s_reject (self, seq, "its routing key (the topic) is longer than 255 bytes");
    /* The loop guard: what the hub took from RabbitMQ does not go back. */
    fanhub_bytes_t mark = host->msg_frame (msg, 2);
    if (mark.size == sizeof BRIDGE_AMQP_MARK - 1
        && memcmp (mark.data, BRIDGE_AMQP_MARK, mark.size) == 0) {
        bridge_count (&self->counters, BRIDGE_LOOPED, 1);
        return FANHUB_OK;
    }
    char key[BRIDGE_SHORTSTR_MAX];
    memcpy (key, head, head_size);
    memcpy (key + head_size, rest, rest_size);
    size_t key_size = head_size + rest_size;

    bridge_job_t *job;
    if (o->fedora.on)
        job = bridge_fedora_job (&o->fedora, key, key_size, body.data, body.size,
                                 host->msg_received_ns (msg));
    else if ((job = malloc (sizeof *job + key_size + body.size))) {
        memset (job, 0, sizeof *job);
        job->key_size = key_size;
        job->body_size = body.size;
        memcpy (job->data, key, key_size);
        if (body.size)
            memcpy (job->data + key_size, body.data, body.size);
        job->json = s_is_json (job->data + key_size, body.size);
    }
    if (!job)
        return FANHUB_RETRY; /* out of memory: the hub keeps it */
    job->ticket = host->msg_ticket (msg);
    job->seq = seq;
    if (!bridge_link_push (self->link, job)) {
        free (job);
        bridge_count (&self->counters, BRIDGE_REFUSED_DOWN, 1);
        return FANHUB_RETRY; /* not connected: the link logs it */
    }
    return FANHUB_PENDING;
}

/* `fanhub check`: the options, the password readable, the TLS files
   readable; no connection. */
static int
s_check (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
         size_t errlen)
{
    bridge_options_t opts;
    if (bridge_options_read (host, ctx, options, false, &opts, err, errlen))
        return -1;
    bridge_options_free (&opts);
    return 0;
}

static void
s_destroy (amqp_state_t *self)
{
    bridge_options_free (&self->opts);
    pthread_mutex_destroy (&self->reject_lock);
    free (self);
}

/* The counters as the consumer's own figures (ABI 1.6): 0, or -1 with
   err when the hub refuses one (a bug here). Nothing before 1.6. */
static int
s_metrics (const fanhub_host_t *host, fanhub_ctx_t *ctx, bridge_counters_t *c, char *err,
           size_t errlen)
{
    static const char *const names[BRIDGE_COUNTERS][2] = {
        [BRIDGE_PUBLISHED] = {"published", "basic.publish frames sent to the broker."},
        [BRIDGE_CONFIRMED] = {"confirmed", "Messages the broker confirmed (basic.ack): done."},
        [BRIDGE_NACKED] = {"nacked", "Messages the broker refused (basic.nack): retried."},
        [BRIDGE_LOST] = {"lost", "Messages unconfirmed when a connection was lost: retried."},
        [BRIDGE_REFUSED_DOWN] = {"refused_down", "Messages answered RETRY while not connected."},
        [BRIDGE_CONNECTS] = {"connects", "Connections made to the broker, the first included."},
        [BRIDGE_RETURNED] = {"returned", "Messages the broker returned unroutable: retried."},
        [BRIDGE_LOOPED] = {"looped", "Messages from bus.amqp, not published again."},
    };
    c->host = host;
    for (int i = 0; FANHUB_HOST_HAS_1_6 (host) && i < BRIDGE_COUNTERS; i++)
        if (!(c->metric[i] = host->metric_new (ctx, names[i][0], FANHUB_METRIC_COUNTER, names[i][1],
                                               err, errlen)))
            return -1;
    return 0;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    if (!FANHUB_HOST_HAS_COMPLETE (host)) {
        snprintf (err, errlen,
                  "amqp needs a hub with asynchronous completion (plugin ABI "
                  "1.1): it completes a message when the broker confirms it");
        return -1;
    }
    amqp_state_t *self = calloc (1, sizeof *self);
    if (!self || pthread_mutex_init (&self->reject_lock, NULL) != 0) {
        free (self);
        snprintf (err, errlen, "amqp: out of memory");
        return -1;
    }
    self->host = host;
    self->ctx = ctx;
    if (bridge_options_read (host, ctx, options, true, &self->opts, err, errlen)
        || s_metrics (host, ctx, &self->counters, err, errlen) != 0) {
        pthread_mutex_destroy (&self->reject_lock);
        free (self);
        return -1;
    }
    self->link = bridge_link_new (host, ctx, &self->opts, &self->counters, err, errlen);
    if (!self->link) {
        s_destroy (self);
        return -1;
    }
    host->log (ctx, FANHUB_LOG_INFO, "publishing to exchange \"%s\" at %s:%d, vhost %s, as %s%s",
               self->opts.exchange, self->opts.host, self->opts.port, self->opts.vhost,
               self->opts.user, self->opts.tls ? ", over TLS" : "");
    *state = self;
    return 0;
}

static void
s_fini (void *state)
{
    amqp_state_t *self = state;
    size_t open = bridge_link_destroy (self->link);
    bridge_counters_t *c = &self->counters;
    self->host->log (self->ctx, FANHUB_LOG_INFO,
                     "published %llu, confirmed %llu, nacked %llu, answered RETRY to %llu "
                     "at lost connections and to %llu while not connected, refused %llu, "
                     "%zu unconfirmed at stop, %llu connections; returned %llu, not published "
                     "again (from bus.amqp) %llu",
                     (unsigned long long) atomic_load (&c->n[BRIDGE_PUBLISHED]),
                     (unsigned long long) atomic_load (&c->n[BRIDGE_CONFIRMED]),
                     (unsigned long long) atomic_load (&c->n[BRIDGE_NACKED]),
                     (unsigned long long) atomic_load (&c->n[BRIDGE_LOST]),
                     (unsigned long long) atomic_load (&c->n[BRIDGE_REFUSED_DOWN]),
                     (unsigned long long) atomic_load (&self->rejected), open,
                     (unsigned long long) atomic_load (&c->n[BRIDGE_CONNECTS]),
                     (unsigned long long) atomic_load (&c->n[BRIDGE_RETURNED]),
                     (unsigned long long) atomic_load (&c->n[BRIDGE_LOOPED]));
    s_destroy (self);
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "amqp", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .fini = s_fini, .check = s_check, .options = bridge_option_table)
