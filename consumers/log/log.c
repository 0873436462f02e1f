/*  log - the shipped consumer that writes every message as one JSON line.

    Each message becomes one line, appended to a file or stdout:

        {"seq":7,"received_at":"2026-11-21T09:03:48.123456Z","topic":"a.b","body":"..."}

    received_at is the hub's receive time in UTC with microseconds. topic and
    body are JSON strings: `"` and `\` are escaped, bytes below 0x20 become
    \b \f \n \r \t or \u00xx, everything else (UTF-8 sequences, 0x7F) is
    copied as is. A body that is not valid UTF-8 is written instead as
    "body_base64" (RFC 4648, padded). Frames after the body are not written.

    Options:
        path      file to append to, created 0644 when missing; "-" (the
                  default) is stdout
        flush_ms  0..3600000, default 100: buffered lines are written when
                  this long has passed since the last write, when the queue
                  runs empty (idle), and at fini; 0 writes every line before
                  consume returns

    consume answers FANHUB_OK when the line is written or buffered, and
    FANHUB_FAIL when it could be neither (the write error is logged once per
    streak of errors, and once more when writing works again). Lines that
    were buffered stay buffered across write errors and are retried. A line
    is never half written unless it is larger than the buffer or a write
    stops part way; such a torn line is ended with a newline so that the
    next line stays readable.

    consume is thread-safe: one mutex guards the buffer, which is cheap
    uncontended and keeps lines whole.

    Rotation: at every reload (SIGHUP or `fanhub reload`) the hub asks the
    plugin to reopen (ABI 1.3): before its next line it opens path again,
    created when missing, and writes there from then on, what is still
    buffered included, so that nothing reaches the renamed file after the
    reload (but from a consume call under way at that moment: use
    logrotate's delaycompress). That is logrotate's
    `create` mode with `postrotate ... fanhub reload` (or kill -HUP). If
    path cannot be opened, the error is logged and lines go on to the file
    that is open.
*/
#include <fanhub/consumer.h>
#include <fanhub/sdk.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOG_BUFFER_SIZE (256 * 1024)
#define LOG_FLUSH_MS_MAX 3600000
/* The fixed part of a line: keys, quotes, seq and timestamp. */
#define LOG_LINE_OVERHEAD 128

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    char *path; /* as configured; "-" is stdout */
    int fd;
    bool own_fd; /* false for stdout, which fini must not close */
    int64_t flush_ns;

    pthread_mutex_t lock; /* guards everything below */
    char *buf;
    size_t len;         /* unwritten bytes at the start of buf */
    uint64_t written;   /* bytes written to fd so far */
    int64_t last_flush; /* CLOCK_MONOTONIC ns of the last flush */
    bool torn;          /* a partly written line needs its newline */
    bool failing;       /* in a streak of write errors */
    uint64_t failed;    /* messages failed in this streak */
    int64_t ts_sec;     /* second that ts_text shows */
    bool ts_valid;
    char ts_text[19]; /* "YYYY-MM-DDTHH:MM:SS" of ts_sec, no NUL */
} log_state_t;

static const char *
s_display_path (const log_state_t *self)
{
    return self->own_fd ? self->path : "stdout";
}

/* Writes the whole buffer. On an error keeps what was not written at the
   start of the buffer, logs the first error of a streak and returns -1. */
static int
s_flush (log_state_t *self)
{
    size_t off = 0;
    int err = 0;
    while (off < self->len) {
        ssize_t n = write (self->fd, self->buf + off, self->len - off);
        if (n > 0)
            off += (size_t) n;
        else if (n < 0 && errno == EINTR)
            continue;
        else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* A non-blocking stdout: wait as a blocking write would. */
            struct pollfd pfd = {.fd = self->fd, .events = POLLOUT};
            poll (&pfd, 1, -1);
        }
        else {
            err = n < 0 ? errno : EIO;
            break;
        }
    }
    self->written += off;
    self->last_flush = fanhub_now_ns ();
    if (err) {
        memmove (self->buf, self->buf + off, self->len - off);
        self->len -= off;
        if (!self->failing)
            self->host->log (self->ctx, FANHUB_LOG_ERROR,
                             "%s: cannot write: %s; messages fail until "
                             "it can (logged once)",
                             s_display_path (self), strerror (err));
        self->failing = true;
        return -1;
    }
    self->len = 0;
    if (self->failing) {
        self->host->log (self->ctx, FANHUB_LOG_INFO,
                         "%s: writing again; %llu messages failed meanwhile", s_display_path (self),
                         (unsigned long long) self->failed);
        self->failing = false;
        self->failed = 0;
    }
    return 0;
}

static inline int
s_put (log_state_t *self, const void *data, size_t size)
{
    const char *p = (const char *) data;
    while (size > 0) {
        if (self->len == LOG_BUFFER_SIZE && s_flush (self))
            return -1;
        size_t room = LOG_BUFFER_SIZE - self->len;
        size_t n = size < room ? size : room;
        memcpy (self->buf + self->len, p, n);
        self->len += n;
        p += n;
        size -= n;
    }
    return 0;
}

/* Appends bytes as the inside of a JSON string, copying runs of bytes that
   need no escape in one go. */
static int
s_put_escaped (log_state_t *self, const uint8_t *p, size_t size)
{
    const uint8_t *end = p + size;
    while (p < end) {
        const uint8_t *run = p;
        char esc[6];
        size_t n = 0;
        while (p < end && (n = fanhub_json_escape_byte (*p, esc)) == 0)
            p++;
        if (p > run && s_put (self, run, (size_t) (p - run)))
            return -1;
        if (p == end)
            break;
        if (s_put (self, esc, n))
            return -1;
        p++;
    }
    return 0;
}

static int
s_put_base64 (log_state_t *self, const uint8_t *p, size_t size)
{
    while (size > 0) {
        if (LOG_BUFFER_SIZE - self->len < 4 && s_flush (self))
            return -1;
        /* As many whole groups as fit, straight into the buffer; the
           last, padded group only at the end of the data. */
        size_t take = (LOG_BUFFER_SIZE - self->len) / 4 * 3;
        if (take >= size)
            take = size;
        self->len += fanhub_base64_encode (self->buf + self->len, p, take);
        p += take;
        size -= take;
    }
    return 0;
}

/* Writes v as exactly `width` decimal digits. */
static char *
s_digits (char *out, unsigned v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        out[i] = (char) ('0' + v % 10);
        v /= 10;
    }
    return out + width;
}

/* Appends the head of a line, up to the opening quote of the topic. The
   date part of the timestamp is cached: consecutive messages mostly share
   their second. */
static int
s_put_head (log_state_t *self, uint64_t seq, int64_t ns)
{
    int64_t sec = ns / 1000000000;
    int64_t sub = ns % 1000000000;
    if (sub < 0) { /* before 1970: round towards the past */
        sub += 1000000000;
        sec--;
    }
    if (!self->ts_valid || sec != self->ts_sec) {
        char text[FANHUB_RFC3339_SIZE];
        fanhub_rfc3339 (text, sec * 1000000000, 0);
        memcpy (self->ts_text, text, sizeof self->ts_text);
        self->ts_sec = sec;
        self->ts_valid = true;
    }

    char head[LOG_LINE_OVERHEAD];
    char *o = head;
    static const char k_seq[] = "{\"seq\":";
    memcpy (o, k_seq, sizeof k_seq - 1);
    o += sizeof k_seq - 1;
    char digits[20];
    int n = 0;
    do {
        digits[n++] = (char) ('0' + seq % 10);
        seq /= 10;
    } while (seq);
    while (n > 0)
        *o++ = digits[--n];
    static const char k_at[] = ",\"received_at\":\"";
    memcpy (o, k_at, sizeof k_at - 1);
    o += sizeof k_at - 1;
    memcpy (o, self->ts_text, sizeof self->ts_text);
    o += sizeof self->ts_text;
    *o++ = '.';
    o = s_digits (o, (unsigned) (sub / 1000), 6);
    static const char k_topic[] = "Z\",\"topic\":\"";
    memcpy (o, k_topic, sizeof k_topic - 1);
    o += sizeof k_topic - 1;
    return s_put (self, head, (size_t) (o - head));
}

static int
s_put_line (log_state_t *self, const fanhub_msg_t *msg)
{
    const fanhub_host_t *host = self->host;
    fanhub_bytes_t topic = host->msg_topic (msg);
    fanhub_bytes_t body = host->msg_body (msg);
    if (s_put_head (self, host->msg_seq (msg), host->msg_received_ns (msg))
        || s_put_escaped (self, (const uint8_t *) topic.data, topic.size))
        return -1;
    if (fanhub_utf8_valid (body.data, body.size)) {
        static const char k_body[] = "\",\"body\":\"";
        if (s_put (self, k_body, sizeof k_body - 1)
            || s_put_escaped (self, (const uint8_t *) body.data, body.size))
            return -1;
    }
    else {
        static const char k_body64[] = "\",\"body_base64\":\"";
        if (s_put (self, k_body64, sizeof k_body64 - 1)
            || s_put_base64 (self, (const uint8_t *) body.data, body.size))
            return -1;
    }
    return s_put (self, "\"}\n", 3);
}

/* Takes back what is still buffered of the line that started at stream
   offset `start`. When part of it reached the file already, the rest is
   dropped and the torn line will get its newline before the next one. */
static void
s_unput_line (log_state_t *self, uint64_t start)
{
    if (self->written <= start)
        self->len = (size_t) (start - self->written);
    else {
        self->len = 0;
        self->torn = true;
    }
}

static fanhub_result_t
s_consume_locked (log_state_t *self, const fanhub_msg_t *msg)
{
    if (self->torn) {
        if (s_put (self, "\n", 1))
            return FANHUB_FAIL;
        self->torn = false;
    }
    /* Make room for the longest this line can be, so that a line that fits
       the buffer is never split across two writes. */
    fanhub_bytes_t topic = self->host->msg_topic (msg);
    fanhub_bytes_t body = self->host->msg_body (msg);
    size_t worst = SIZE_MAX;
    if (topic.size < SIZE_MAX / 16 && body.size < SIZE_MAX / 16)
        worst = LOG_LINE_OVERHEAD + 6 * topic.size + 6 * body.size;
    if (worst > LOG_BUFFER_SIZE - self->len && self->len > 0 && s_flush (self))
        return FANHUB_FAIL;

    uint64_t start = self->written + self->len;
    if (s_put_line (self, msg)) {
        s_unput_line (self, start);
        return FANHUB_FAIL;
    }
    int64_t now = fanhub_now_ns ();
    if (self->flush_ns == 0) {
        /* The promise of flush_ms 0: written before consume returns. */
        if (s_flush (self)) {
            s_unput_line (self, start);
            return FANHUB_FAIL;
        }
    }
    else if (now - self->last_flush >= self->flush_ns)
        s_flush (self); /* on error the line stays buffered for later */
    return FANHUB_OK;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    log_state_t *self = (log_state_t *) state;
    pthread_mutex_lock (&self->lock);
    fanhub_result_t rc = s_consume_locked (self, msg);
    if (rc != FANHUB_OK)
        self->failed++;
    pthread_mutex_unlock (&self->lock);
    return rc;
}

static void
s_idle (void *state)
{
    log_state_t *self = (log_state_t *) state;
    pthread_mutex_lock (&self->lock);
    if (self->len > 0)
        s_flush (self);
    pthread_mutex_unlock (&self->lock);
}

static void
s_destroy (log_state_t *self)
{
    if (self->own_fd && self->fd >= 0)
        close (self->fd);
    pthread_mutex_destroy (&self->lock);
    free (self->buf);
    free (self->path);
    free (self);
}

static void
s_fini (void *state)
{
    log_state_t *self = (log_state_t *) state;
    pthread_mutex_lock (&self->lock);
    if (self->torn && s_put (self, "\n", 1) == 0)
        self->torn = false;
    if (self->len > 0 && s_flush (self))
        self->host->log (self->ctx, FANHUB_LOG_ERROR, "%s: %zu buffered bytes lost at shutdown",
                         s_display_path (self), self->len);
    pthread_mutex_unlock (&self->lock);
    if (self->own_fd && close (self->fd))
        self->host->log (self->ctx, FANHUB_LOG_ERROR, "%s: close: %s", self->path,
                         strerror (errno));
    self->fd = -1;
    s_destroy (self);
}

/* ABI 1.3: opens path again (logrotate renamed it). What is buffered
   goes to the new file, never to the renamed one. */
static void
s_reopen (void *state)
{
    log_state_t *self = (log_state_t *) state;
    if (!self->own_fd)
        return;
    int fd = open (self->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        self->host->log (self->ctx, FANHUB_LOG_ERROR,
                         "%s: cannot reopen: %s; writing on to the file opened before", self->path,
                         strerror (errno));
        return;
    }
    pthread_mutex_lock (&self->lock);
    int old = self->fd;
    self->fd = fd;
    self->torn = false; /* a torn line stays in the old file */
    pthread_mutex_unlock (&self->lock);
    if (close (old))
        self->host->log (self->ctx, FANHUB_LOG_ERROR, "%s: close after reopen: %s", self->path,
                         strerror (errno));
}

/* The options, as init and check read them. */
typedef struct {
    const char *path;
    const fanhub_option_t *path_node; /* NULL for the default */
    int64_t flush_ms;
} log_options_t;

static const fanhub_opt_t s_options[] = {
    FANHUB_OPT_FIELD (log_options_t, "path", FANHUB_OPT_FILE, path, "-", 0, 0,
                      "the file to append to, or \"-\" for stdout (default)"),
    FANHUB_OPT_FIELD (log_options_t, "flush_ms", FANHUB_OPT_DURATION, flush_ms, "100", 0,
                      LOG_FLUSH_MS_MAX, "how long a line may wait in the buffer"),
    FANHUB_OPT_END,
};

static int
s_parse_options (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options,
                 log_options_t *out, char *err, size_t errlen)
{
    *out = (log_options_t){0};
    if (host->options_load (ctx, options, out, sizeof *out, err, errlen) != 0)
        return -1;
    out->path_node = host->option_get (options, "path");
    return 0;
}

/* What init would find when it opens the file, found without opening it. */
static int
s_check (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
         size_t errlen)
{
    log_options_t o;
    if (s_parse_options (host, ctx, options, &o, err, errlen) != 0)
        return -1;
    if (strcmp (o.path, "-") == 0)
        return 0;
    bool exists;
    char why[PATH_MAX + 128];
    if (fanhub_probe_file (o.path, &exists, why, sizeof why) != 0) {
        snprintf (err, errlen, "options.path: %s: cannot open: %s (%s)", o.path, why,
                  host->option_where (o.path_node));
        return -1;
    }
    if (!exists)
        host->log (ctx, FANHUB_LOG_INFO, "%s does not exist yet; run creates it", o.path);
    return 0;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    log_options_t o;
    if (s_parse_options (host, ctx, options, &o, err, errlen) != 0)
        return -1;
    const char *path = o.path;
    const fanhub_option_t *path_node = o.path_node;
    int64_t flush_ms = o.flush_ms;

    log_state_t *self = (log_state_t *) calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "log: out of memory");
        return -1;
    }
    self->host = host;
    self->ctx = ctx;
    self->fd = -1;
    self->flush_ns = (int64_t) flush_ms * 1000000;
    self->last_flush = fanhub_now_ns ();
    self->path = strdup (path);
    self->buf = (char *) malloc (LOG_BUFFER_SIZE);
    if (!self->path || !self->buf || pthread_mutex_init (&self->lock, NULL) != 0) {
        free (self->buf);
        free (self->path);
        free (self);
        snprintf (err, errlen, "log: out of memory");
        return -1;
    }
    if (strcmp (path, "-") == 0)
        self->fd = STDOUT_FILENO;
    else {
        self->fd = open (path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (self->fd < 0) {
            snprintf (err, errlen, "options.path: %s: cannot open: %s (%s)", path, strerror (errno),
                      host->option_where (path_node));
            s_destroy (self);
            return -1;
        }
        self->own_fd = true;
    }
    *state = self;
    return 0;
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "log", .version = "1.1",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .options = s_options, .idle = s_idle, .fini = s_fini, .check = s_check,
                        .reopen = s_reopen)
