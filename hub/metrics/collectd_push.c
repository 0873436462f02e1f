/*  collectd_push - the hub pushes its figures to collectd's unixsock
    plugin. See collectd_push.h.

    The connection is kept from one batch to the next (unixsock serves
    each connection on its own thread until it closes). A batch is
    pipelined: the lines are written while the replies are read, with
    poll(), so collectd never blocks writing a reply we have not read yet,
    and one batch costs about as much as collectd's own work on it. Every
    wait is bounded: no progress for S_IDLE_MS, or the whole batch taking
    longer than S_BATCH_MS, counts as a dead collectd. Any failure closes
    the connection; the next batch connects again. A connection kept from
    an earlier batch that turns out to be closed by the other end (collectd
    restarted in between) is replaced at once, once, without a warning: a
    restart between two batches loses nothing.
*/
#include "collectd_push.h"

#include "clock.h"
#include "collectd_notify.h"
#include "log.h"
#include "stats_format.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define S_IDLE_MS 1000   /* default: no byte moved for this long, collectd is hung */
#define S_BATCH_MS 2000  /* default: a batch never holds the control thread longer */
#define S_REPLY_MAX 1024 /* collectd's replies are one short line each */

/* How one exchange ended. */
typedef enum {
    S_DONE = 0,    /* every line was answered */
    S_FAILED = -1, /* timeout, protocol error, local error */
    S_GONE = -2,   /* collectd closed the connection */
} s_result_t;

struct fh_collectd_push {
    char *path;        /* metrics.collectd.socket */
    int64_t idle_ms;   /* S_IDLE_MS, or a test's own */
    int64_t batch_ms;  /* S_BATCH_MS, or a test's own */
    char host[256];    /* collectd host name: this machine's name */
    double interval_s; /* the interval= of every value */
    int64_t interval_ns;
    bool started;    /* a batch was due once: next_ns is set */
    int64_t next_ns; /* when the next batch is due */
    int fd;          /* -1 when not connected */
    bool worked;     /* a batch went through once: said so */
    bool failing;    /* a failure was logged; quiet until one works */
    bool refusing;   /* a refusal was logged; quiet until none */
    char reply[S_REPLY_MAX];
    size_t reply_len;             /* bytes of an unfinished reply line in reply */
    char refused_id[256];         /* the first refused identifier of a batch */
    char refused_why[256];        /* ... and collectd's reason */
    fh_collectd_notify_t *notify; /* PUTNOTIF state across batches */
};

/* The limits of pushers made from now on (tests change them). */
static int64_t s_default_idle_ms = S_IDLE_MS;
static int64_t s_default_batch_ms = S_BATCH_MS;

void
fh_collectd_push_set_default_limits (int64_t idle_ms, int64_t batch_ms)
{
    s_default_idle_ms = idle_ms;
    s_default_batch_ms = batch_ms;
}

fh_collectd_push_t *
fh_collectd_push_new (const fh_config_t *config)
{
    if (!config->metrics.collectd_socket)
        return NULL;
    fh_collectd_push_t *self = calloc (1, sizeof *self);
    if (self) {
        self->idle_ms = s_default_idle_ms;
        self->batch_ms = s_default_batch_ms;
    }
    if (!self)
        return NULL;
    self->path = strdup (config->metrics.collectd_socket);
    int64_t after_ms = config->metrics.collectd_disconnected_after_ms;
    self->notify = fh_collectd_notify_new (after_ms > 0 ? (double) after_ms / 1e3
                                                        : FH_COLLECTD_DISCONNECTED_AFTER_S);
    if (!self->path || !self->notify) {
        fh_collectd_notify_destroy (&self->notify);
        free (self->path);
        free (self);
        return NULL;
    }
    self->fd = -1;
    int64_t interval_ms = config->metrics.collectd_interval_ms > 0
                              ? config->metrics.collectd_interval_ms
                              : config->metrics.interval_ms;
    if (interval_ms <= 0) /* the config refuses it; tick divides by it */
        interval_ms = FH_DEFAULT_METRICS_INTERVAL_MS;
    self->interval_ns = interval_ms * INT64_C (1000000);
    self->interval_s = (double) interval_ms / 1e3;
    /* Short host name, as collectd's own Hostname with FQDNLookup false;
       stats_format makes it safe for an identifier. */
    if (gethostname (self->host, sizeof self->host) != 0)
        snprintf (self->host, sizeof self->host, "localhost");
    self->host[sizeof self->host - 1] = '\0';
    return self;
}

static void
s_disconnect (fh_collectd_push_t *self)
{
    if (self->fd >= 0)
        close (self->fd);
    self->fd = -1;
    self->reply_len = 0;
}

void
fh_collectd_push_destroy (fh_collectd_push_t **self_p)
{
    fh_collectd_push_t *self = *self_p;
    if (!self)
        return;
    s_disconnect (self);
    fh_collectd_notify_destroy (&self->notify);
    free (self->path);
    free (self);
    *self_p = NULL;
}

static int
s_connect (fh_collectd_push_t *self, char *why, size_t whylen)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen (self->path) >= sizeof addr.sun_path) {
        snprintf (why, whylen, "the socket path is longer than %zu bytes",
                  sizeof addr.sun_path - 1);
        return -1;
    }
    memcpy (addr.sun_path, self->path, strlen (self->path) + 1);
    int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf (why, whylen, "socket: %s", strerror (errno));
        return -1;
    }
    /* Linux bounds a Unix connect by the send timeout: a collectd whose
       listen backlog is full cannot hold the control thread. */
    struct timeval timeout
        = {(time_t) (self->idle_ms / 1000), (suseconds_t) ((self->idle_ms % 1000) * 1000)};
    setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    if (connect (fd, (struct sockaddr *) &addr, sizeof addr) != 0) {
        int error = errno;
        close (fd);
        const char *hint = "";
        if (error == ENOENT || error == ECONNREFUSED)
            hint = " (is collectd running, with LoadPlugin unixsock and this SocketFile?)";
        else if (error == EACCES)
            hint = " (the hub's user needs to be in unixsock's SocketGroup, with "
                   "SocketPerms \"0660\")";
        snprintf (why, whylen, "connect: %s%s", strerror (error), hint);
        return -1;
    }
    self->fd = fd;
    self->reply_len = 0;
    return 0;
}

/* Notes one reply line; line points at the PUTVAL line it answers. */
static int
s_reply (fh_collectd_push_t *self, const char *reply, const char *line, size_t *refused, char *why,
         size_t whylen)
{
    char *end;
    long status = strtol (reply, &end, 10);
    if (end == reply || (*end != ' ' && *end != '\0')) {
        snprintf (why, whylen, "unexpected reply '%.64s'", reply);
        return -1;
    }
    if (status >= 0)
        return 0;
    if ((*refused)++ == 0) {
        /* The identifier is the first quoted field of the line. */
        const char *id = strchr (line, '"');
        size_t len = id ? strcspn (id + 1, "\"\n") : 0;
        snprintf (self->refused_id, sizeof self->refused_id, "%.*s", (int) len, id ? id + 1 : "");
        while (*end == ' ')
            end++;
        snprintf (self->refused_why, sizeof self->refused_why, "%s", end);
    }
    return 0;
}

/* Takes the whole reply lines read so far, each answering *line (the
   next line sent whole, before sent_end), which moves on. -1 with why on
   a reply to no command or one too long. */
static int
s_take_replies (fh_collectd_push_t *self, const char *sent_end, size_t count, const char **line,
                size_t *answered, size_t *refused, char *why, size_t whylen)
{
    char *newline;
    while ((newline = memchr (self->reply, '\n', self->reply_len))) {
        /* A reply can only answer a line that was sent whole. */
        if (*answered == count || strchr (*line, '\n') + 1 > sent_end) {
            snprintf (why, whylen, "collectd sent a reply to no command");
            return -1;
        }
        *newline = '\0';
        if (newline > self->reply && newline[-1] == '\r')
            newline[-1] = '\0';
        if (s_reply (self, self->reply, *line, refused, why, whylen) != 0)
            return -1;
        ++*answered;
        *line = strchr (*line, '\n') + 1;
        size_t used = (size_t) (newline + 1 - self->reply);
        memmove (self->reply, newline + 1, self->reply_len - used);
        self->reply_len -= used;
    }
    if (self->reply_len == sizeof self->reply) {
        snprintf (why, whylen, "collectd sent a reply line of more than %d bytes", S_REPLY_MAX);
        return -1;
    }
    return 0;
}

/* Writes lines (count of them) and reads as many replies, at once. */
static s_result_t
s_exchange (fh_collectd_push_t *self, const char *lines, size_t len, size_t count, size_t *answered,
            size_t *refused, char *why, size_t whylen)
{
    size_t sent = 0;
    const char *line = lines; /* the line the next reply answers */
    int64_t start = fh_clock_mono_ns ();
    int64_t progress = start;
    while (*answered < count) {
        int64_t now = fh_clock_mono_ns ();
        int64_t idle_end = progress + self->idle_ms * INT64_C (1000000);
        int64_t batch_end = start + self->batch_ms * INT64_C (1000000);
        int64_t deadline = idle_end < batch_end ? idle_end : batch_end;
        if (now >= deadline) {
            if (now >= batch_end)
                snprintf (why, whylen, "collectd answered only %zu of %zu values in %d ms",
                          *answered, count, (int) self->batch_ms);
            else
                snprintf (why, whylen,
                          "collectd answered %zu of %zu values and then nothing "
                          "for %d ms",
                          *answered, count, (int) self->idle_ms);
            return S_FAILED;
        }
        struct pollfd item = {self->fd, (short) (POLLIN | (sent < len ? POLLOUT : 0)), 0};
        int rc = poll (&item, 1, (int) ((deadline - now + 999999) / 1000000));
        if (rc < 0 && errno != EINTR) {
            snprintf (why, whylen, "poll: %s", strerror (errno));
            return S_FAILED;
        }
        if (rc <= 0)
            continue;
        if ((item.revents & POLLOUT) && sent < len) {
            ssize_t n = send (self->fd, lines + sent, len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0) {
                sent += (size_t) n;
                progress = fh_clock_mono_ns ();
            }
            else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                snprintf (why, whylen, "send: %s", strerror (errno));
                return errno == EPIPE || errno == ECONNRESET ? S_GONE : S_FAILED;
            }
        }
        if (!(item.revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t n = recv (self->fd, self->reply + self->reply_len,
                          sizeof self->reply - self->reply_len, MSG_DONTWAIT);
        if (n == 0) {
            snprintf (why, whylen, "collectd closed the connection");
            return S_GONE;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                continue;
            snprintf (why, whylen, "recv: %s", strerror (errno));
            return errno == ECONNRESET ? S_GONE : S_FAILED;
        }
        progress = fh_clock_mono_ns ();
        self->reply_len += (size_t) n;
        if (s_take_replies (self, lines + sent, count, &line, answered, refused, why, whylen))
            return S_FAILED;
    }
    return S_DONE;
}

int
fh_collectd_push_send (fh_collectd_push_t *self, const char *lines)
{
    size_t len = strlen (lines);
    if (len == 0)
        return 0;
    assert (lines[len - 1] == '\n');
    size_t count = 0, values = 0; /* lines; PUTVAL ones (the others: PUTNOTIF) */
    for (const char *p = lines; p && *p; p = strchr (p, '\n'), p = p ? p + 1 : NULL) {
        count++;
        values += strncmp (p, "PUTVAL ", 7) == 0;
    }

    char why[512] = "";
    size_t refused = 0;
    bool done = false;
    for (int attempt = 0; attempt < 2 && !done; attempt++) {
        bool fresh = self->fd < 0;
        if (fresh && s_connect (self, why, sizeof why) != 0)
            break;
        size_t answered = 0;
        refused = 0;
        s_result_t result
            = s_exchange (self, lines, len, count, &answered, &refused, why, sizeof why);
        done = result == S_DONE;
        if (!done)
            s_disconnect (self);
        /* Only a kept connection that was closed before answering
           anything is retried: collectd restarted since the last batch. */
        if (fresh || result != S_GONE || answered > 0)
            break;
    }
    if (!done) {
        if (!self->failing)
            fh_warning ("collectd: cannot push to %s: %s; retrying every %gs, logged "
                        "once until it works",
                        self->path, why, self->interval_s);
        self->failing = true;
        return -1;
    }
    if (self->failing)
        fh_info ("collectd: pushing to %s again", self->path);
    else if (!self->worked)
        fh_info ("collectd: pushing %zu values to %s every %gs", values, self->path,
                 self->interval_s);
    self->failing = false;
    self->worked = true;
    if (refused > 0 && !self->refusing)
        fh_warning ("collectd: %s refused %zu of %zu values, the first \"%s\": %s; logged "
                    "once until it takes them all",
                    self->path, refused, count, self->refused_id, self->refused_why);
    else if (refused == 0 && self->refusing)
        fh_info ("collectd: %s takes every value again", self->path);
    self->refusing = refused > 0;
    return refused < INT_MAX ? (int) refused : INT_MAX;
}

char *
fh_collectd_push_batch (fh_collectd_push_t *self, fh_stats_t *stats, int64_t now_ns)
{
    if (!self || !stats || (self->started && now_ns < self->next_ns))
        return NULL;
    /* The first batch goes at once; the next ones on its grid, skipping
       the points that were missed (a late tick does not cause a burst). */
    if (!self->started)
        self->next_ns = now_ns;
    self->started = true;
    self->next_ns += ((now_ns - self->next_ns) / self->interval_ns + 1) * self->interval_ns;

    fh_metrics_snapshot_t *snapshot = fh_stats_snapshot (stats);
    char *lines = snapshot ? fh_metrics_collectd (snapshot, self->host, self->interval_s, 0) : NULL;
    char *notes
        = snapshot ? fh_collectd_notify (self->notify, snapshot, self->host, (double) now_ns / 1e9,
                                         (double) (now_ns + fh_clock_wall_offset_ns ()) / 1e9)
                   : NULL;
    fh_metrics_snapshot_destroy (&snapshot);
    size_t len = lines && notes ? strlen (lines) : 0;
    char *batch = len ? realloc (lines, len + strlen (notes) + 1) : NULL;
    if (!batch) {
        fh_warning ("collectd: out of memory; this batch is not sent");
        free (lines);
        free (notes);
        return NULL;
    }
    strcpy (batch + len, notes);
    free (notes);
    return batch;
}

void
fh_collectd_push_flush (fh_collectd_push_t *self, char *batch)
{
    /* A refused notification is logged like a refused value; a lost
       batch takes its notifications along: say them again. */
    if (self && batch && fh_collectd_push_send (self, batch) < 0)
        fh_collectd_notify_resend (self->notify);
    free (batch);
}

void
fh_collectd_push_tick (fh_collectd_push_t *self, fh_stats_t *stats, int64_t now_ns)
{
    fh_collectd_push_flush (self, fh_collectd_push_batch (self, stats, now_ns));
}

void
fh_collectd_push_set_limits (fh_collectd_push_t *self, int64_t idle_ms, int64_t batch_ms)
{
    self->idle_ms = idle_ms;
    self->batch_ms = batch_ms;
}
