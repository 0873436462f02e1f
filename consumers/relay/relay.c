/*  relay - the shipped consumer that re-publishes messages to another bus.

    fedmsg-relay and fedmsg-gateway for fanhub: every message the consumer's
    topics match is sent on, all frames of it, from a ZeroMQ PUB socket that
    binds or connects where the options say. Another hub (or anything that
    speaks SUB) subscribes there, so one hub can feed others: the scale-out
    path of the design.

    Options:
        bind | connect      an endpoint or a list of endpoints; exactly one
                            of the two keys
        topic_prefix        {from: PREFIX, to: PREFIX}: a topic that starts
                            with `from` is sent with that part replaced by
                            `to`; other topics are sent unchanged. Either
                            may be "" (from "" prepends, to "" strips).
        sndhwm              integer >= 0, default 0 (no limit): messages the
                            socket queues per subscriber (with connect: per
                            endpoint, also while it is not connected) before
                            ZeroMQ drops for it
        linger_ms           -1 (forever) .. 3600000, default 1000: how long
                            fini waits for queued messages to go out
        require_subscriber  true | false, default false: answer FANHUB_RETRY
                            rather than send while no subscriber wants the
                            (rewritten) topic
        subscriber_wait_ms  0 .. 3600000, default 0: with require_subscriber,
                            how long consume waits for such a subscriber
                            before it answers FANHUB_RETRY; only the first
                            message of a streak of such answers waits

        curve               CurveZMQ on the relay's socket (see
                            docs/security.md): {secret_key_file: the
                            relay's zcert secret file (mode 0600),
                            server_public_key: the receiving hub's key}
                            with connect; {secret_key_file, allow: [client
                            keys] and/or allow_dir: zcert directory} with
                            bind, where a ZAP handler in the relay's own
                            context lets in those keys only

    Frames. The topic is rewritten; the body and any further frames go out
    byte for byte. The hub's buffers are only valid during consume, so each
    frame is copied once, into the ZeroMQ message that is sent.

    Subscribers. A PUB socket cannot tell whether anyone listens: a message
    sent before a subscriber's subscription has arrived is gone (ZeroMQ's
    slow joiner). With require_subscriber the socket is an XPUB instead,
    which still speaks PUB to subscribers but hands the relay each
    subscription as it arrives and each unsubscription when a topic loses
    its last subscriber (XPUB reports only those transitions; a bound
    socket also when a subscriber disconnects, a connecting one keeps the
    endpoint's queue and subscriptions across reconnects), so the relay
    knows which prefixes someone wants. A message that nobody wants yet is
    not sent but answered FANHUB_RETRY, and the hub's retries hold it until
    a subscriber comes.

    The socket lives in the plugin's own ZeroMQ context, made in init and
    terminated in fini: the relay depends on nothing of the hub's. A ZeroMQ
    socket is not thread-safe, so the descriptor does not claim to be;
    init, consume and fini never overlap (the hub's threading contract) and
    thread creation and joining order their memory.

    consume answers FANHUB_OK when the message was handed to ZeroMQ (with
    no subscriber, or a subscriber beyond sndhwm, ZeroMQ drops it: PUB
    semantics), FANHUB_RETRY when sending failed or (require_subscriber) no
    subscriber wants it. Failures are logged once per streak, and once more
    when sending works again.
*/
#include <fanhub/consumer.h>
#include <fanhub/sdk.h>

#include "relay_options.h"
#include "relay_zap.h"

#include <czmq.h>
#include <fanhub/sdk_curve.h>

#include <zmq.h>

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One prefix some subscriber has subscribed to. XPUB passes a prefix on
   when its first subscriber arrives and its unsubscription when the last
   one leaves (or, on a bound socket, disconnects), so each count is 1;
   counting rather than flagging keeps the set right should that change. */
typedef struct {
    char *data;
    size_t size;
    size_t count;
} relay_sub_t;

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    void *zctx;
    void *sock;
    relay_zap_t *zap; /* bind with curve: who may subscribe */

    bool rewrite;
    char *from; /* topic_prefix.from, NUL-terminated */
    size_t from_len;
    char *to;
    size_t to_len;

    bool require_subscriber;
    int64_t subscriber_wait_ns;
    relay_sub_t *subs;
    size_t nsubs;
    size_t subs_cap;

    bool send_failing; /* in a streak of send errors */
    bool unwanted;     /* in a streak of messages nobody wanted */
    uint64_t streak;   /* messages answered RETRY in the current streak */
} relay_state_t;

/* Sets CURVE on the socket (and, with bind, starts the ZAP handler in
   the relay's context, before any bind). */
static int
s_apply_curve (relay_state_t *self, const relay_options_t *opt, bool binding, char *err,
               size_t errlen)
{
    const fanhub_host_t *host = self->host;
    int server = binding;
    int rc = zmq_setsockopt (self->sock, ZMQ_CURVE_SERVER, &server, sizeof server);
    rc |= zmq_setsockopt (self->sock, ZMQ_CURVE_SECRETKEY, opt->secret_key, 40);
    if (!binding) {
        rc |= zmq_setsockopt (self->sock, ZMQ_CURVE_PUBLICKEY, opt->public_key, 40);
        rc |= zmq_setsockopt (self->sock, ZMQ_CURVE_SERVERKEY, opt->server_public_key, 40);
    }
    if (rc != 0) {
        snprintf (err, errlen, "relay: cannot set the CURVE options: %s", zmq_strerror (errno));
        return -1;
    }
    if (!binding)
        return 0;
    const fanhub_option_t *allow = opt->allow;
    size_t count = allow ? host->option_count (allow) : 0;
    const char **keys = calloc (count + 1, sizeof *keys);
    if (!keys) {
        snprintf (err, errlen, "relay: out of memory");
        return -1;
    }
    for (size_t i = 0; i < count; i++)
        keys[i] = host->option_scalar (host->option_at (allow, i, NULL));
    if (zmq_setsockopt (self->sock, ZMQ_ZAP_DOMAIN, "fanhub-relay", 12) == 0)
        self->zap
            = relay_zap_new (self->zctx, "fanhub-relay", keys, count, opt->allow_dir, err, errlen);
    else
        snprintf (err, errlen, "relay: cannot set the ZAP domain: %s", zmq_strerror (errno));
    free (keys);
    return self->zap ? 0 : -1;
}

static void
s_destroy (relay_state_t *self)
{
    if (self->sock)
        zmq_close (self->sock);
    relay_zap_destroy (&self->zap); /* after the socket it answered for */
    if (self->zctx)
        while (zmq_ctx_term (self->zctx) != 0 && errno == EINTR)
            ;
    for (size_t i = 0; i < self->nsubs; i++)
        free (self->subs[i].data);
    free (self->subs);
    free (self->from);
    free (self->to);
    free (self);
}

/* Makes the socket, sets its options and binds or connects every
   endpoint. */
static int
s_open_socket (relay_state_t *self, const relay_options_t *opt, char *err, size_t errlen)
{
    const fanhub_host_t *host = self->host;
    self->zctx = zmq_ctx_new ();
    if (!self->zctx) {
        snprintf (err, errlen, "relay: cannot make a ZeroMQ context: %s", zmq_strerror (errno));
        return -1;
    }
    self->sock = zmq_socket (self->zctx, opt->require_subscriber ? ZMQ_XPUB : ZMQ_PUB);
    if (!self->sock) {
        snprintf (err, errlen, "relay: cannot make a ZeroMQ socket: %s", zmq_strerror (errno));
        return -1;
    }
    int hwm = (int) opt->sndhwm;
    int linger = (int) opt->linger_ms;
    /* IPv6 only when an endpoint spells an IPv6 address: switched on for
       all, it would resolve a name like localhost to ::1 first. */
    int ipv6 = 0;
    size_t count = fanhub_option_items (host, opt->endpoints);
    for (size_t i = 0; i < count; i++)
        if (strchr (host->option_scalar (relay_endpoint_at (host, opt->endpoints, i)), '['))
            ipv6 = 1;
    if (zmq_setsockopt (self->sock, ZMQ_SNDHWM, &hwm, sizeof hwm)
        || zmq_setsockopt (self->sock, ZMQ_LINGER, &linger, sizeof linger)
        || zmq_setsockopt (self->sock, ZMQ_IPV6, &ipv6, sizeof ipv6)) {
        snprintf (err, errlen, "relay: cannot set socket options: %s", zmq_strerror (errno));
        return -1;
    }
    bool binding = strcmp (opt->endpoints_key, "bind") == 0;
    if (opt->curve && s_apply_curve (self, opt, binding, err, errlen) != 0)
        return -1;
    for (size_t i = 0; i < count; i++) {
        const fanhub_option_t *node = relay_endpoint_at (host, opt->endpoints, i);
        const char *endpoint = host->option_scalar (node);
        int rc = binding ? zmq_bind (self->sock, endpoint) : zmq_connect (self->sock, endpoint);
        if (rc != 0) {
            char index[32] = "";
            if (host->option_kind (opt->endpoints) == FANHUB_OPTION_LIST)
                snprintf (index, sizeof index, "[%zu]", i);
            snprintf (err, errlen, "options.%s%s: %s: cannot %s: %s (%s)", opt->endpoints_key,
                      index, endpoint, binding ? "bind" : "connect", zmq_strerror (errno),
                      host->option_where (node));
            return -1;
        }
        if (binding) {
            /* A wildcard (a port of "*") becomes a real port: say
               which, or nobody can connect to it. */
            char last[256];
            size_t size = sizeof last;
            if (zmq_getsockopt (self->sock, ZMQ_LAST_ENDPOINT, last, &size) == 0)
                host->log (self->ctx, FANHUB_LOG_INFO, "relaying on %s", last);
        }
        else
            host->log (self->ctx, FANHUB_LOG_INFO, "relaying to %s", endpoint);
    }
    return 0;
}

/* init without the socket: the options and the endpoints' spelling. */
static int
s_check (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
         size_t errlen)
{
    (void) ctx;
    if (host->abi_major != FANHUB_ABI_MAJOR) {
        snprintf (err, errlen, "relay: host ABI %u, plugin built for %u",
                  (unsigned) host->abi_major, (unsigned) FANHUB_ABI_MAJOR);
        return -1;
    }
    relay_options_t opt;
    if (relay_options_read (host, ctx, options, &opt, err, errlen))
        return -1;
    bool binding = strcmp (opt.endpoints_key, "bind") == 0;
    size_t count = fanhub_option_items (host, opt.endpoints);
    for (size_t i = 0; i < count; i++) {
        const fanhub_option_t *node = relay_endpoint_at (host, opt.endpoints, i);
        const char *endpoint = host->option_scalar (node);
        char why[PATH_MAX + 256];
        if (relay_endpoint_check (endpoint, binding, why, sizeof why) != 0) {
            char index[32] = "";
            if (host->option_kind (opt.endpoints) == FANHUB_OPTION_LIST)
                snprintf (index, sizeof index, "[%zu]", i);
            snprintf (err, errlen, "options.%s%s: %s: cannot %s: %s (%s)", opt.endpoints_key, index,
                      endpoint, binding ? "bind" : "connect", why, host->option_where (node));
            return -1;
        }
    }
    return 0;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    if (host->abi_major != FANHUB_ABI_MAJOR) {
        snprintf (err, errlen, "relay: host ABI %u, plugin built for %u",
                  (unsigned) host->abi_major, (unsigned) FANHUB_ABI_MAJOR);
        return -1;
    }
    relay_options_t opt;
    if (relay_options_read (host, ctx, options, &opt, err, errlen))
        return -1;

    relay_state_t *self = (relay_state_t *) calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "relay: out of memory");
        return -1;
    }
    self->host = host;
    self->ctx = ctx;
    self->require_subscriber = opt.require_subscriber;
    self->subscriber_wait_ns = (int64_t) opt.subscriber_wait_ms * 1000000;
    if (opt.prefix) {
        const char *from = opt.from, *to = opt.to;
        self->rewrite = true;
        self->from = strdup (from);
        self->to = strdup (to);
        if (!self->from || !self->to) {
            snprintf (err, errlen, "relay: out of memory");
            s_destroy (self);
            return -1;
        }
        self->from_len = strlen (from);
        self->to_len = strlen (to);
    }
    if (s_open_socket (self, &opt, err, errlen)) {
        s_destroy (self);
        return -1;
    }
    *state = self;
    return 0;
}

/* Does the prefix p match the topic made of a then b? */
static bool
s_prefix_of (const char *p, size_t psize, const char *a, size_t asize, const char *b, size_t bsize)
{
    if (psize > asize + bsize)
        return false;
    size_t n = psize < asize ? psize : asize;
    if (memcmp (p, a, n) != 0)
        return false;
    return memcmp (p + n, b, psize - n) == 0;
}

static void
s_subscription (relay_state_t *self, const unsigned char *data, size_t size)
{
    if (size == 0 || data[0] > 1)
        return; /* not a (un)subscription: XPUB passes other messages too */
    bool subscribe = data[0] == 1;
    const char *prefix = (const char *) data + 1;
    size--;
    for (size_t i = 0; i < self->nsubs; i++) {
        relay_sub_t *sub = &self->subs[i];
        if (sub->size != size || memcmp (sub->data, prefix, size) != 0)
            continue;
        if (subscribe)
            sub->count++;
        else if (--sub->count == 0) {
            free (sub->data);
            *sub = self->subs[--self->nsubs];
        }
        return;
    }
    if (!subscribe)
        return;
    if (self->nsubs == self->subs_cap) {
        size_t cap = self->subs_cap ? 2 * self->subs_cap : 8;
        relay_sub_t *subs = realloc (self->subs, cap * sizeof *subs);
        if (!subs)
            return; /* out of memory: the prefix stays unknown, and what
                       only it wants is answered RETRY */
        self->subs = subs;
        self->subs_cap = cap;
    }
    char *copy = malloc (size ? size : 1);
    if (!copy)
        return;
    memcpy (copy, prefix, size);
    self->subs[self->nsubs++] = (relay_sub_t){copy, size, 1};
}

/* Takes every subscription message waiting on the XPUB, without
   blocking. */
static void
s_read_subscriptions (relay_state_t *self)
{
    while (true) {
        zmq_msg_t msg;
        zmq_msg_init (&msg);
        if (zmq_msg_recv (&msg, self->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close (&msg);
            return;
        }
        s_subscription (self, (const unsigned char *) zmq_msg_data (&msg), zmq_msg_size (&msg));
        zmq_msg_close (&msg);
    }
}

static bool
s_wanted (const relay_state_t *self, const char *head, size_t head_size, const char *rest,
          size_t rest_size)
{
    for (size_t i = 0; i < self->nsubs; i++)
        if (s_prefix_of (self->subs[i].data, self->subs[i].size, head, head_size, rest, rest_size))
            return true;
    return false;
}

/* Waits, at most subscriber_wait_ms, until a subscriber wants the topic
   head + rest. */
static bool
s_await_subscriber (relay_state_t *self, const char *head, size_t head_size, const char *rest,
                    size_t rest_size)
{
    s_read_subscriptions (self);
    if (s_wanted (self, head, head_size, rest, rest_size))
        return true;
    /* Only the first message of a streak waits: a backlog that nobody
       wants must not cost subscriber_wait_ms each. */
    if (self->subscriber_wait_ns == 0 || self->unwanted)
        return false;
    int64_t deadline = fanhub_now_ns () + self->subscriber_wait_ns;
    while (true) {
        int64_t left = deadline - fanhub_now_ns ();
        if (left <= 0)
            return false;
        zmq_pollitem_t item = {.socket = self->sock, .events = ZMQ_POLLIN};
        long ms = (long) ((left + 999999) / 1000000);
        if (zmq_poll (&item, 1, ms) < 0 && errno != EINTR)
            return false;
        s_read_subscriptions (self);
        if (s_wanted (self, head, head_size, rest, rest_size))
            return true;
    }
}

/* Ends a streak of RETRY answers: says so once. */
static void
s_streak_over (relay_state_t *self)
{
    if (self->send_failing)
        self->host->log (self->ctx, FANHUB_LOG_INFO,
                         "sending again; %llu messages were answered RETRY "
                         "meanwhile",
                         (unsigned long long) self->streak);
    else if (self->unwanted)
        self->host->log (self->ctx, FANHUB_LOG_INFO,
                         "a subscriber is here; %llu messages were answered "
                         "RETRY while none was",
                         (unsigned long long) self->streak);
    self->send_failing = false;
    self->unwanted = false;
    self->streak = 0;
}

/* Sends the topic head + rest and then frames 1.. of msg. */
static int
s_send (relay_state_t *self, const fanhub_msg_t *msg, const char *head, size_t head_size,
        const char *rest, size_t rest_size)
{
    const fanhub_host_t *host = self->host;
    size_t frames = host->msg_frame_count (msg);
    zmq_msg_t topic;
    if (zmq_msg_init_size (&topic, head_size + rest_size) != 0)
        return -1;
    char *out = (char *) zmq_msg_data (&topic);
    if (head_size)
        memcpy (out, head, head_size);
    if (rest_size)
        memcpy (out + head_size, rest, rest_size);
    /* DONTWAIT: PUB never blocks (it drops past sndhwm) and must not start
       to if that ever changes; the consumer thread waits for nobody. */
    int flags = ZMQ_DONTWAIT | (frames > 1 ? ZMQ_SNDMORE : 0);
    if (zmq_msg_send (&topic, self->sock, flags) < 0) {
        int saved = errno;
        zmq_msg_close (&topic);
        errno = saved;
        return -1;
    }
    for (size_t i = 1; i < frames; i++) {
        fanhub_bytes_t frame = host->msg_frame (msg, i);
        flags = ZMQ_DONTWAIT | (i + 1 < frames ? ZMQ_SNDMORE : 0);
        if (zmq_send (self->sock, frame.data, frame.size, flags) < 0)
            return -1;
    }
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    relay_state_t *self = (relay_state_t *) state;
    const fanhub_host_t *host = self->host;
    fanhub_bytes_t topic = host->msg_topic (msg);

    /* The topic to send is head + rest: the original, or `to` and what
       follows `from`. */
    const char *head = topic.size ? (const char *) topic.data : "";
    const char *rest = "";
    size_t head_size = topic.size, rest_size = 0;
    if (self->rewrite && topic.size >= self->from_len
        && memcmp (topic.data, self->from, self->from_len) == 0) {
        head = self->to;
        head_size = self->to_len;
        rest = (const char *) topic.data + self->from_len;
        rest_size = topic.size - self->from_len;
    }

    if (self->require_subscriber && !s_await_subscriber (self, head, head_size, rest, rest_size)) {
        if (!self->unwanted && !self->send_failing) {
            host->log (self->ctx, FANHUB_LOG_WARNING,
                       "no subscriber wants %.*s%.*s yet; answering RETRY "
                       "until one does (logged once)",
                       (int) (head_size > 200 ? 200 : head_size), head,
                       (int) (rest_size > 200 ? 200 : rest_size), rest);
            self->unwanted = true;
        }
        self->streak++;
        return FANHUB_RETRY;
    }
    if (s_send (self, msg, head, head_size, rest, rest_size) != 0) {
        if (!self->send_failing) {
            host->log (self->ctx, FANHUB_LOG_ERROR,
                       "cannot send: %s; answering RETRY until it can "
                       "(logged once)",
                       zmq_strerror (errno));
            self->send_failing = true;
            self->unwanted = false;
        }
        self->streak++;
        return FANHUB_RETRY;
    }
    if (self->send_failing || self->unwanted)
        s_streak_over (self);
    return FANHUB_OK;
}

static void
s_fini (void *state)
{
    s_destroy ((relay_state_t *) state);
}

/* flags 0: one ZeroMQ socket, never used from two threads at once. */
FANHUB_CONSUMER_DEFINE (s_desc, .name = "relay", .version = "1.0", .flags = 0, .init = s_init,
                        .consume = s_consume, .options = relay_option_table, .fini = s_fini,
                        .check = s_check)
