/*  link.c - the amqp plugin's connection to the broker, on a thread of its
    own.

    The thread owns the connection (librabbitmq's connection state is not
    thread-safe), which connect.c makes at each (re)connection: it takes the jobs consume hands it, in order, publishes
    each on channel 1 in confirm mode, and reads the broker's basic.ack and
    basic.nack as they come, also when no new message arrives: it sleeps in
    poll(2) on the socket and on an eventfd that consume writes when it
    hands over a job while the thread sleeps.

    Publisher confirms. After confirm.select the broker numbers the
    publishes of the channel 1, 2, 3, ...: the delivery tag. `window` holds
    the ticket and job of every publish not yet confirmed, indexed by tag.
    basic.ack completes its message (with `multiple`, every one up to the
    tag) with FANHUB_OK, basic.nack with FANHUB_RETRY; a message returned
    first (basic.return, mandatory) is held by its routing key until a
    probe of that key is routed (held.c). The hub's max_pending bounds
    how many are open (handed over or published, not confirmed): the window
    and the hand-off queue together never hold more.

    A lost connection (a socket error, connection.close or channel.close
    from the broker, no confirm within confirm_timeout_ms) completes every
    message handed over and not confirmed with FANHUB_RETRY: the hub offers
    it again, and it may reach the broker twice (at most max_pending
    duplicates per lost connection). Until the link is connected again,
    consume answers RETRY at once. The thread reconnects at once, then after
    100 ms, doubling up to reconnect_max_ms; the first failure of a streak
    and the recovery are logged, the rest at debug level.
*/
#include "bridge.h"

#include <amqp.h>
#include <amqp_ssl_socket.h> /* amqp_uninitialize_ssl_library */

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define LINK_BACKOFF_MIN_NS (100 * INT64_C (1000000))
/* The longest poll: the stop flag and heartbeats are looked at this often
   at least. */
#define LINK_POLL_MAX_MS 1000

typedef struct {
    fanhub_ticket_t ticket;
    int64_t published_ns;
    uint64_t seq;      /* the hub's: a basic.return names it in fanhub_seq */
    bool returned;     /* a basic.return came: its ack holds it (held.c) */
    bool probe;        /* its key's probe (held.c) */
    bridge_job_t *job; /* kept until confirmed: a return holds it */
} s_slot_t;

struct bridge_link {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    const bridge_options_t *opts;
    bridge_counters_t *counters;
    pthread_t thread;
    int wake_fd;

    pthread_mutex_t lock; /* guards the hand-off and the flags below */
    bridge_job_t *head, *tail;
    bool connected; /* consume may hand over jobs */
    bool sleeping;  /* the thread is in poll: wake it */
    bool stopping;

    /* The thread's own. */
    amqp_connection_state_t conn;
    s_slot_t *window; /* ring of unconfirmed publishes, by delivery tag */
    size_t window_cap;
    size_t window_head; /* slot of base_tag */
    uint64_t base_tag;  /* the oldest tag still in the window */
    uint64_t next_tag;  /* the tag of the next publish */
    int64_t backoff_ns;
    int64_t next_try_ns;
    bool failing;           /* in a streak of failures, logged once */
    bool returns_logged;    /* a return was logged since the last confirm */
    bridge_held_t *held;    /* returned messages by routing key */
    bridge_job_t *released; /* a key's, once its probe was routed: first out */
    uint64_t attempts;      /* connection attempts in the streak */
};

static int64_t
s_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
s_close (bridge_link_t *self)
{
    if (self->conn) {
        amqp_destroy_connection (self->conn);
        self->conn = NULL;
    }
}

/* A new connection (connect.c), its delivery tags from 1; -1 with why.
   *refused: see bridge_connect. */
static int
s_connect (bridge_link_t *self, bool *refused, char *why, size_t whylen)
{
    self->conn = bridge_connect (self->opts, refused, why, whylen);
    if (!self->conn)
        return -1;
    self->base_tag = self->next_tag = 1;
    self->window_head = 0;
    bridge_count (self->counters, BRIDGE_CONNECTS, 1);
    return 0;
}

/* -------------------------------------------------------------------------
   The window of unconfirmed publishes */

static s_slot_t *
s_slot (bridge_link_t *self, uint64_t tag)
{
    return &self->window[(self->window_head + (tag - self->base_tag)) & (self->window_cap - 1)];
}

/* Room for one more: the ring doubles when full. -1 when out of memory. */
static int
s_window_reserve (bridge_link_t *self)
{
    size_t used = (size_t) (self->next_tag - self->base_tag);
    if (used < self->window_cap)
        return 0;
    size_t cap = self->window_cap ? self->window_cap * 2 : 1024;
    s_slot_t *ring = calloc (cap, sizeof *ring);
    if (!ring)
        return -1;
    for (size_t i = 0; i < used; i++)
        ring[i] = *s_slot (self, self->base_tag + i);
    free (self->window);
    self->window = ring;
    self->window_cap = cap;
    self->window_head = 0;
    return 0;
}

/* Settles tag (with multiple, every tag up to it) with result. */
static void
s_settle (bridge_link_t *self, uint64_t tag, bool multiple, fanhub_result_t result)
{
    if (tag < self->base_tag || tag >= self->next_tag)
        return; /* not ours (already settled): nothing to do */
    uint64_t first = multiple ? self->base_tag : tag;
    uint64_t settled = 0;
    int64_t now = s_now_ns ();
    for (uint64_t t = first; t <= tag; t++) {
        s_slot_t *slot = s_slot (self, t);
        if (!slot->ticket)
            continue;
        bridge_job_t *job = slot->job;
        slot->job = NULL;
        slot->ticket = 0;
        /* Confirmed, but returned first: no queue took it, not done; it
           waits for its route (held.c), as does a probe nacked. */
        bool hold = slot->returned || (slot->probe && result != FANHUB_OK);
        if (hold && bridge_held_add (self->held, job, slot->probe, now) == 0)
            continue;
        self->host->complete (self->ctx, job->ticket, hold ? FANHUB_RETRY : result);
        settled += !hold;
        if (slot->probe && !hold) { /* routed: the route is there */
            bridge_job_t **end = &self->released;
            while (*end)
                end = &(*end)->next;
            *end = bridge_held_release (self->held, job);
        }
        free (job);
    }
    if (settled && result == FANHUB_OK)
        self->returns_logged = false;
    bridge_count (self->counters, result == FANHUB_OK ? BRIDGE_CONFIRMED : BRIDGE_NACKED, settled);
    while (self->base_tag < self->next_tag && !s_slot (self, self->base_tag)->ticket) {
        self->base_tag++;
        self->window_head = (self->window_head + 1) & (self->window_cap - 1);
    }
}

/* -------------------------------------------------------------------------
   Connection lost */

/* Completes every job in the list with RETRY and frees it. */
static size_t
s_retry_jobs (bridge_link_t *self, bridge_job_t *job)
{
    size_t count = 0;
    while (job) {
        bridge_job_t *next = job->next;
        self->host->complete (self->ctx, job->ticket, FANHUB_RETRY);
        free (job);
        job = next;
        count++;
    }
    return count;
}

/* The connection is gone (or never came): every message handed over and
   not confirmed goes back to the hub with RETRY; consume answers RETRY
   until the next connection. Logs the first failure of a streak. */
static void
s_break (bridge_link_t *self, const char *why)
{
    s_close (self);
    pthread_mutex_lock (&self->lock);
    bridge_job_t *queued = self->head;
    self->head = self->tail = NULL;
    self->connected = false;
    pthread_mutex_unlock (&self->lock);
    size_t unconfirmed = 0;
    for (uint64_t t = self->base_tag; t < self->next_tag; t++)
        if (s_slot (self, t)->ticket) {
            self->host->complete (self->ctx, s_slot (self, t)->ticket, FANHUB_RETRY);
            s_slot (self, t)->ticket = 0;
            free (s_slot (self, t)->job);
            s_slot (self, t)->job = NULL;
            unconfirmed++;
        }
    self->base_tag = self->next_tag;
    size_t waiting = s_retry_jobs (self, queued) + s_retry_jobs (self, self->released)
                     + s_retry_jobs (self, bridge_held_take_all (self->held));
    self->released = NULL;
    bridge_count (self->counters, BRIDGE_LOST, unconfirmed + waiting);
    int64_t now = s_now_ns ();
    if (!self->failing) {
        self->host->log (self->ctx, FANHUB_LOG_ERROR,
                         "broker %s:%d: %s; %zu unconfirmed and %zu waiting messages answered "
                         "RETRY, and every message until it is back (logged once)",
                         self->opts->host, self->opts->port, why, unconfirmed, waiting);
        self->failing = true;
        self->attempts = 0;
        self->backoff_ns = 0; /* the first try again is at once */
    }
    else {
        self->host->log (self->ctx, FANHUB_LOG_DEBUG, "broker %s:%d: still failing: %s",
                         self->opts->host, self->opts->port, why);
        self->backoff_ns = self->backoff_ns ? self->backoff_ns * 2 : LINK_BACKOFF_MIN_NS;
        if (self->backoff_ns > self->opts->reconnect_max_ns)
            self->backoff_ns = self->opts->reconnect_max_ns;
    }
    self->next_try_ns = now + self->backoff_ns;
}

/* Marks the link connected (consume may hand over jobs again). */
static void
s_connected (bridge_link_t *self)
{
    pthread_mutex_lock (&self->lock);
    self->connected = true;
    pthread_mutex_unlock (&self->lock);
    if (self->failing)
        self->host->log (self->ctx, FANHUB_LOG_INFO,
                         "broker %s:%d: connected again after %llu attempts", self->opts->host,
                         self->opts->port, (unsigned long long) self->attempts);
    self->failing = false;
    self->backoff_ns = 0;
}

/* -------------------------------------------------------------------------
   The thread */

/* Publishes one job, which its slot keeps (probe: its key's probe); -1
   with why when the connection failed (job not taken). */
static int
s_publish (bridge_link_t *self, bridge_job_t *job, bool probe, char *why, size_t whylen)
{
    if (s_window_reserve (self)) {
        snprintf (why, whylen, "out of memory");
        return -1;
    }
    amqp_table_entry_t headers[5]
        = {{.key = amqp_cstring_bytes ("fanhub_seq"),
            .value = {.kind = AMQP_FIELD_KIND_I64, .value.i64 = (int64_t) job->seq}}};
    amqp_basic_properties_t props = {
        ._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_HEADERS_FLAG,
        .delivery_mode = AMQP_DELIVERY_PERSISTENT,
        .headers = {.num_entries = 1, .entries = headers},
    };
    if (job->json) {
        props._flags |= AMQP_BASIC_CONTENT_TYPE_FLAG;
        props.content_type = amqp_cstring_bytes ("application/json");
    }
    if (job->fedora)
        bridge_fedora_props (job, &props, headers);
    amqp_bytes_t key = {.len = job->key_size, .bytes = (void *) job->data};
    amqp_bytes_t body = {.len = job->body_size, .bytes = (void *) (job->data + job->key_size)};
    int rc = amqp_basic_publish (self->conn, BRIDGE_CHANNEL,
                                 amqp_cstring_bytes (self->opts->exchange), key,
                                 self->opts->mandatory, 0, &props, body);
    if (rc != AMQP_STATUS_OK) {
        snprintf (why, whylen, "publish: %s", amqp_error_string2 (rc));
        return -1;
    }
    s_slot_t *slot = s_slot (self, self->next_tag);
    slot->ticket = job->ticket;
    slot->published_ns = s_now_ns ();
    slot->seq = job->seq;
    slot->returned = false;
    slot->probe = probe;
    slot->job = job;
    self->next_tag++;
    bridge_count (self->counters, BRIDGE_PUBLISHED, 1);
    return 0;
}

/* Publishes every job handed over; -1 with why (the unpublished rest
   answered RETRY) when the connection failed. */
static int
s_publish_queued (bridge_link_t *self, char *why, size_t whylen)
{
    pthread_mutex_lock (&self->lock);
    bridge_job_t *job = self->head;
    self->head = self->tail = NULL;
    pthread_mutex_unlock (&self->lock);
    /* A released key's messages first: they are older than its new ones. */
    bridge_job_t **end = &self->released;
    while (*end)
        end = &(*end)->next;
    *end = job;
    job = self->released;
    self->released = NULL;
    /* Then one probe per key whose backoff allows. */
    bridge_job_t *probe = bridge_held_probe (self->held, s_now_ns ());
    while (job || probe) {
        bool probing = !job;
        bridge_job_t *next = probing ? NULL : job->next;
        if (probing)
            job = probe;
        /* A message of a held key waits behind its key's (held.c). */
        if (!probing && bridge_held_queue (self->held, job)) {
            job = next;
            continue;
        }
        if (s_publish (self, job, probing, why, whylen) != 0) {
            if (!probing)
                job->next = next;
            size_t lost = s_retry_jobs (self, job) + (probing ? 0 : s_retry_jobs (self, probe));
            bridge_count (self->counters, BRIDGE_LOST, lost);
            return -1;
        }
        if (probing)
            probe = bridge_held_probe (self->held, s_now_ns ());
        job = next;
    }
    return 0;
}

/* Answers a close from the broker with its close-ok, for a clean end. */
static void
s_close_ok (bridge_link_t *self, const amqp_frame_t *frame)
{
    if (frame->payload.method.id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_connection_close_ok_t ok = {0};
        amqp_send_method (self->conn, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
    }
    else {
        amqp_channel_close_ok_t ok = {0};
        amqp_send_method (self->conn, frame->channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
    }
}

/* A basic.return (mandatory, and no queue took the message): its content
   follows, whose fanhub_seq header names the message; its slot is
   settled RETRY when the confirm comes (the broker sends the return
   first). -1 with why when the connection failed meanwhile. */
static int
s_returned (bridge_link_t *self, amqp_channel_t channel, const amqp_basic_return_t *r, char *why,
            size_t whylen)
{
    char text[128];
    snprintf (text, sizeof text, "%u %.*s", r->reply_code, (int) r->reply_text.len,
              (const char *) r->reply_text.bytes);
    char key[BRIDGE_SHORTSTR_MAX + 1];
    snprintf (key, sizeof key, "%.*s", (int) r->routing_key.len,
              (const char *) r->routing_key.bytes);
    amqp_message_t message;
    amqp_rpc_reply_t reply = amqp_read_message (self->conn, channel, &message, 0);
    if (reply.reply_type != AMQP_RESPONSE_NORMAL) {
        bridge_reply_why (&reply, "reading a returned message", why, whylen);
        return -1;
    }
    int64_t seq = -1;
    const amqp_table_t *h = &message.properties.headers;
    for (int i = 0; (message.properties._flags & AMQP_BASIC_HEADERS_FLAG) && i < h->num_entries;
         i++)
        if (h->entries[i].value.kind == AMQP_FIELD_KIND_I64 && h->entries[i].key.len == 10
            && memcmp (h->entries[i].key.bytes, "fanhub_seq", 10) == 0)
            seq = h->entries[i].value.value.i64;
    amqp_destroy_message (&message);
    for (uint64_t t = self->base_tag; t < self->next_tag; t++) {
        s_slot_t *slot = s_slot (self, t);
        if (slot->ticket && (int64_t) slot->seq == seq && !slot->returned) {
            slot->returned = true;
            break;
        }
    }
    bridge_count (self->counters, BRIDGE_RETURNED, 1);
    if (!self->returns_logged) {
        self->host->log (
            self->ctx, FANHUB_LOG_WARNING,
            "message %lld returned by the broker (%s): no queue is bound for "
            "routing key %s; it waits for a route (logged once until one is confirmed)",
            (long long) seq, text, key);
        self->returns_logged = true;
    }
    return 0;
}

/* Reads every frame that has arrived: confirms, and what ends the
   connection. -1 with why when the connection is gone. */
static int
s_read_frames (bridge_link_t *self, char *why, size_t whylen)
{
    struct timeval zero = {0, 0};
    while (true) {
        amqp_frame_t frame;
        int rc = amqp_simple_wait_frame_noblock (self->conn, &frame, &zero);
        if (rc == AMQP_STATUS_TIMEOUT)
            break;
        if (rc != AMQP_STATUS_OK) {
            snprintf (why, whylen, "connection lost: %s", amqp_error_string2 (rc));
            return -1;
        }
        if (frame.frame_type != AMQP_FRAME_METHOD)
            continue;
        amqp_method_t *m = &frame.payload.method;
        if (m->id == AMQP_BASIC_RETURN_METHOD) {
            if (s_returned (self, frame.channel, m->decoded, why, whylen))
                return -1;
        }
        else if (m->id == AMQP_BASIC_ACK_METHOD) {
            amqp_basic_ack_t *ack = m->decoded;
            s_settle (self, ack->delivery_tag, ack->multiple, FANHUB_OK);
        }
        else if (m->id == AMQP_BASIC_NACK_METHOD) {
            amqp_basic_nack_t *nack = m->decoded;
            s_settle (self, nack->delivery_tag, nack->multiple, FANHUB_RETRY);
        }
        else if (m->id == AMQP_CONNECTION_CLOSE_METHOD || m->id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_connection_close_t *c = m->decoded; /* same layout as channel.close */
            snprintf (why, whylen, "the broker closed the %s: %u %.*s",
                      m->id == AMQP_CONNECTION_CLOSE_METHOD ? "connection" : "channel",
                      c->reply_code, (int) c->reply_text.len, (const char *) c->reply_text.bytes);
            s_close_ok (self, &frame);
            return -1;
        }
        else if (m->id == AMQP_CONNECTION_BLOCKED_METHOD)
            self->host->log (self->ctx, FANHUB_LOG_WARNING,
                             "the broker blocks publishing (a resource alarm); confirms wait");
        else if (m->id == AMQP_CONNECTION_UNBLOCKED_METHOD)
            self->host->log (self->ctx, FANHUB_LOG_INFO, "the broker takes publishes again");
    }
    amqp_maybe_release_buffers (self->conn);
    return 0;
}

/* Sleeps until a job is handed over, the socket has something, the stop
   flag, or timeout_ms; returns at once when a job waits. */
static void
s_sleep (bridge_link_t *self, int timeout_ms)
{
    pthread_mutex_lock (&self->lock);
    bool idle = !self->head && !self->stopping;
    self->sleeping = idle;
    pthread_mutex_unlock (&self->lock);
    if (idle) {
        struct pollfd fds[2]
            = {{.fd = self->wake_fd, .events = POLLIN},
               {.fd = self->conn ? amqp_get_sockfd (self->conn) : -1, .events = POLLIN}};
        if (poll (fds, 2, timeout_ms) < 0 && errno != EINTR)
            self->host->log (self->ctx, FANHUB_LOG_WARNING, "poll: %s", strerror (errno));
    }
    uint64_t count;
    pthread_mutex_lock (&self->lock);
    self->sleeping = false;
    pthread_mutex_unlock (&self->lock);
    if (read (self->wake_fd, &count, sizeof count) < 0 && errno != EAGAIN)
        self->host->log (self->ctx, FANHUB_LOG_WARNING, "eventfd: %s", strerror (errno));
}

/* How long the connected thread may sleep: until the oldest unconfirmed
   publish reaches confirm_timeout_ms, half a heartbeat, or
   LINK_POLL_MAX_MS. 0 when data waits in librabbitmq's buffers. */
static int
s_poll_ms (bridge_link_t *self, int64_t now)
{
    if (amqp_frames_enqueued (self->conn) || amqp_data_in_buffer (self->conn))
        return 0;
    int64_t ms = LINK_POLL_MAX_MS;
    if (self->opts->heartbeat_s > 0 && self->opts->heartbeat_s * 500 < ms)
        ms = self->opts->heartbeat_s * 500;
    int64_t probe = bridge_held_next_ns (self->held);
    if (probe != INT64_MAX && (probe - now) / 1000000 + 1 < ms)
        ms = probe <= now ? 0 : (probe - now) / 1000000 + 1;
    if (self->base_tag < self->next_tag) {
        int64_t due = s_slot (self, self->base_tag)->published_ns + self->opts->confirm_timeout_ns;
        int64_t left = (due - now) / 1000000 + 1;
        if (left < ms)
            ms = left < 0 ? 0 : left;
    }
    return (int) ms;
}

/* One turn while connected: publish what was handed over, read what came,
   check the oldest confirm's deadline, sleep when there is nothing to do. */
static void
s_turn_connected (bridge_link_t *self)
{
    char why[512];
    if (s_publish_queued (self, why, sizeof why) || s_read_frames (self, why, sizeof why)) {
        s_break (self, why);
        return;
    }
    int64_t now = s_now_ns ();
    if (self->base_tag < self->next_tag
        && now - s_slot (self, self->base_tag)->published_ns > self->opts->confirm_timeout_ns) {
        snprintf (why, sizeof why,
                  "no confirm for message %llu (delivery tag %llu) within "
                  "confirm_timeout_ms",
                  (unsigned long long) self->base_tag, (unsigned long long) self->base_tag);
        s_break (self, why);
        return;
    }
    s_sleep (self, s_poll_ms (self, now));
}

/* One turn while not connected: connect when the backoff allows. */
static void
s_turn_down (bridge_link_t *self)
{
    int64_t now = s_now_ns ();
    if (now < self->next_try_ns) {
        int64_t ms = (self->next_try_ns - now) / 1000000 + 1;
        s_sleep (self, ms > LINK_POLL_MAX_MS ? LINK_POLL_MAX_MS : (int) ms);
        return;
    }
    char why[512];
    bool refused;
    self->attempts++;
    if (s_connect (self, &refused, why, sizeof why) == 0)
        s_connected (self);
    else
        s_break (self, why);
}

static void *
s_thread (void *arg)
{
    bridge_link_t *self = arg;
    while (true) {
        pthread_mutex_lock (&self->lock);
        bool stopping = self->stopping;
        pthread_mutex_unlock (&self->lock);
        if (stopping)
            break;
        if (self->conn)
            s_turn_connected (self);
        else
            s_turn_down (self);
    }
    return NULL;
}

/* -------------------------------------------------------------------------
   The link's interface */

static void
s_free (bridge_link_t *self)
{
    s_close (self);
    if (self->wake_fd >= 0)
        close (self->wake_fd);
    pthread_mutex_destroy (&self->lock);
    for (uint64_t t = self->base_tag; self->window && t < self->next_tag; t++)
        free (s_slot (self, t)->job);
    for (bridge_job_t *job = self->released, *next; job; job = next) {
        next = job->next;
        free (job);
    }
    bridge_held_destroy (&self->held);
    free (self->window);
    free (self);
}

bridge_link_t *
bridge_link_new (const fanhub_host_t *host, fanhub_ctx_t *ctx, const bridge_options_t *opts,
                 bridge_counters_t *counters, char *err, size_t errlen)
{
    bridge_link_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "amqp: out of memory");
        return NULL;
    }
    self->host = host;
    self->ctx = ctx;
    self->opts = opts;
    self->counters = counters;
    self->wake_fd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC);
    self->held = bridge_held_new ();
    if (!self->held || self->wake_fd < 0 || pthread_mutex_init (&self->lock, NULL) != 0) {
        snprintf (err, errlen, "amqp: %s", self->held ? strerror (errno) : "out of memory");
        if (self->wake_fd >= 0)
            close (self->wake_fd);
        bridge_held_destroy (&self->held);
        free (self);
        return NULL;
    }
    char why[512];
    bool refused = false;
    self->attempts = 1;
    if (s_connect (self, &refused, why, sizeof why) == 0)
        s_connected (self);
    else if (refused) {
        snprintf (err, errlen, "broker %s:%d, vhost %s, user %s: %s (%s)", opts->host, opts->port,
                  opts->vhost, opts->user, why, opts->where);
        s_free (self);
        return NULL;
    }
    else
        s_break (self, why);
    if (pthread_create (&self->thread, NULL, s_thread, self) != 0) {
        snprintf (err, errlen, "amqp: cannot start its thread");
        s_free (self);
        return NULL;
    }
    return self;
}

bool
bridge_link_push (bridge_link_t *self, bridge_job_t *job)
{
    job->next = NULL;
    pthread_mutex_lock (&self->lock);
    bool taken = self->connected && !self->stopping;
    bool wake = taken && self->sleeping;
    if (taken) {
        if (self->tail)
            self->tail->next = job;
        else
            self->head = job;
        self->tail = job;
        self->sleeping = false; /* one wake-up is enough */
    }
    pthread_mutex_unlock (&self->lock);
    if (wake) {
        uint64_t one = 1;
        if (write (self->wake_fd, &one, sizeof one) < 0)
            self->host->log (self->ctx, FANHUB_LOG_WARNING, "eventfd: %s", strerror (errno));
    }
    return taken;
}

size_t
bridge_link_destroy (bridge_link_t *self)
{
    pthread_mutex_lock (&self->lock);
    self->stopping = true;
    pthread_mutex_unlock (&self->lock);
    uint64_t one = 1;
    if (write (self->wake_fd, &one, sizeof one) < 0)
        self->host->log (self->ctx, FANHUB_LOG_WARNING, "eventfd: %s", strerror (errno));
    pthread_join (self->thread, NULL);
    size_t open = 0;
    for (uint64_t t = self->base_tag; t < self->next_tag; t++)
        open += s_slot (self, t)->ticket != 0;
    for (bridge_job_t *job = self->head, *next; job; job = next) {
        next = job->next;
        free (job);
        open++;
    }
    for (bridge_job_t *job = self->released; job; job = job->next)
        open++;
    for (bridge_job_t *job = bridge_held_take_all (self->held), *next; job; job = next) {
        next = job->next;
        free (job);
        open++;
    }
    if (self->conn) {
        struct timeval quick = {1, 0};
        amqp_set_rpc_timeout (self->conn, &quick);
        amqp_channel_close (self->conn, BRIDGE_CHANNEL, AMQP_REPLY_SUCCESS);
        amqp_connection_close (self->conn, AMQP_REPLY_SUCCESS);
    }
    bool tls = self->opts->tls;
    s_free (self);
    /* librabbitmq's OpenSSL state (made by the first TLS socket) is
       released here; while another instance holds a TLS socket librabbitmq
       refuses (AMQP_STATUS_SOCKET_INUSE) and keeps it, and a later socket
       makes it again. */
    if (tls)
        amqp_uninitialize_ssl_library ();
    return open;
}
