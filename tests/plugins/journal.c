/*  journal - a thread-safe test plugin that writes one line per message
    the moment it is done ("SEQ BODY-FIRST-FIELD ATTEMPT ANSWER\n", one
    write(2) on an O_APPEND file), so that a kill -9 of the hub leaves an
    exact record of what was done. With `async: true` it answers
    FANHUB_PENDING and completes from a thread of its own, in batches: the
    shape of a plugin that confirms later (a database commit, a broker's
    confirm).

    options:
      path: FILE        the journal (required)
      async: BOOL       answer PENDING; a completer thread finishes them
      batch: N          async: complete when N are open (default 1), or ...
      batch_us: N       ... when the oldest open one is N us old (default
                        1000), or at idle
      hold_file: F      while F does not exist, consume waits (1 ms polls)
                        or, async, nothing is completed (what a stuck
                        database looks like)
      us_max: N         sleep a pseudo-random 0..N microseconds per message
      retry_marker: S   a body containing S is answered RETRY on its first
                        attempt (late, when async)
      fail_marker: S    a body containing S is answered FAIL (late, when
                        async)
      never_marker: S   async: a body containing S is answered PENDING and
                        never completed (a lost confirm)
      untaken_marker: S async: a body containing S is answered PENDING
                        without asking for its ticket (a plugin's error)
      double_complete: BOOL  async: complete every ticket twice (the hub
                        must ignore the second)

    The first field of the body is the text between `"i":` and the next
    `,` or `}` (the integration tests' bodies), or "-".
*/
#define _GNU_SOURCE 1 /* memmem */
#include <fanhub/consumer.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    fanhub_ticket_t ticket;
    fanhub_result_t answer;
    char line[96];
    int64_t since;
} open_t;

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    int fd;
    bool async, double_complete;
    long batch, batch_us, us_max;
    char *hold_file, *retry_marker, *fail_marker, *never_marker, *untaken_marker;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    open_t *open;
    size_t count, room;
    bool flush, stop;
    unsigned char *attempts; /* per seq, for retry_marker */
    size_t attempts_room;
    pthread_t completer;
    bool completer_started;
} journal_t;

static int64_t
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
s_write (journal_t *self, const char *line)
{
    size_t len = strlen (line);
    ssize_t n;
    do
        n = write (self->fd, line, len);
    while (n < 0 && errno == EINTR);
}

/* Completes every open one (the lock held on entry and on return). */
static void
s_complete_all (journal_t *self)
{
    size_t count = self->count;
    open_t *batch = malloc (count * sizeof *batch);
    if (!batch)
        return;
    memcpy (batch, self->open, count * sizeof *batch);
    self->count = 0;
    pthread_mutex_unlock (&self->lock);
    for (size_t i = 0; i < count; i++) {
        if (batch[i].answer == FANHUB_OK)
            s_write (self, batch[i].line); /* done, then told */
        self->host->complete (self->ctx, batch[i].ticket, batch[i].answer);
        if (self->double_complete)
            self->host->complete (self->ctx, batch[i].ticket, batch[i].answer);
    }
    free (batch);
    pthread_mutex_lock (&self->lock);
}

static bool
s_held (journal_t *self)
{
    return self->hold_file && access (self->hold_file, F_OK) != 0;
}

static void *
s_completer (void *arg)
{
    journal_t *self = arg;
    pthread_mutex_lock (&self->lock);
    while (!self->stop) {
        bool due = self->count
                   && ((long) self->count >= self->batch || self->flush
                       || s_now () - self->open[0].since >= self->batch_us * 1000);
        if (due && !s_held (self)) {
            self->flush = false;
            s_complete_all (self);
            continue;
        }
        struct timespec until;
        clock_gettime (CLOCK_REALTIME, &until);
        until.tv_nsec += 500000; /* 0.5 ms: the batch age and hold_file are polled */
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait (&self->wake, &self->lock, &until);
    }
    pthread_mutex_unlock (&self->lock);
    return NULL;
}

static bool
s_flag (const char *text)
{
    return strcmp (text, "true") == 0 || strcmp (text, "yes") == 0 || strcmp (text, "1") == 0;
}

static void s_fini (void *state);

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    journal_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    self->host = host;
    self->ctx = ctx;
    self->fd = -1;
    self->batch = 1;
    self->batch_us = 1000;
    pthread_mutex_init (&self->lock, NULL);
    pthread_cond_init (&self->wake, NULL);
    const char *path = NULL;
    for (size_t i = 0; i < host->option_count (options); i++) {
        const char *key;
        const char *text = host->option_scalar (host->option_at (options, i, &key));
        if (!text)
            continue;
        if (strcmp (key, "path") == 0)
            path = text;
        else if (strcmp (key, "async") == 0)
            self->async = s_flag (text);
        else if (strcmp (key, "double_complete") == 0)
            self->double_complete = s_flag (text);
        else if (strcmp (key, "batch") == 0)
            self->batch = strtol (text, NULL, 10);
        else if (strcmp (key, "batch_us") == 0)
            self->batch_us = strtol (text, NULL, 10);
        else if (strcmp (key, "us_max") == 0)
            self->us_max = strtol (text, NULL, 10);
        else if (strcmp (key, "hold_file") == 0)
            self->hold_file = strdup (text);
        else if (strcmp (key, "retry_marker") == 0)
            self->retry_marker = strdup (text);
        else if (strcmp (key, "fail_marker") == 0)
            self->fail_marker = strdup (text);
        else if (strcmp (key, "never_marker") == 0)
            self->never_marker = strdup (text);
        else if (strcmp (key, "untaken_marker") == 0)
            self->untaken_marker = strdup (text);
        else {
            snprintf (err, errlen, "options.%s: unknown option", key);
            s_fini (self);
            return -1;
        }
    }
    if (self->async && !FANHUB_HOST_HAS_COMPLETE (host)) {
        snprintf (err, errlen, "async: the hub has no host->complete (ABI %u.%u)",
                  (unsigned) host->abi_major, (unsigned) host->abi_minor);
        s_fini (self);
        return -1;
    }
    if (!path || (self->fd = open (path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0) {
        snprintf (err, errlen, "options.path: %s", path ? strerror (errno) : "required");
        s_fini (self);
        return -1;
    }
    if (self->batch < 1)
        self->batch = 1;
    if (self->async) {
        if (pthread_create (&self->completer, NULL, s_completer, self) != 0) {
            snprintf (err, errlen, "cannot start the completer thread");
            s_fini (self);
            return -1;
        }
        self->completer_started = true;
    }
    *state = self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    journal_t *self = state;
    uint64_t seq = self->host->msg_seq (msg);
    fanhub_bytes_t body = self->host->msg_body (msg);
    while (!self->async && s_held (self)) {
        struct timespec ms = {0, 1000000};
        nanosleep (&ms, NULL);
    }
    if (self->us_max > 0) {
        long us = (long) ((seq * 2654435761u) % (uint64_t) (self->us_max + 1));
        struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
        nanosleep (&ts, NULL);
    }
    char first[32] = "-";
    const char *at = memmem (body.data, body.size, "\"i\":", 4);
    if (at) {
        at += 4;
        size_t n = 0;
        const char *end = (const char *) body.data + body.size;
        while (at + n < end && at[n] != ',' && at[n] != '}' && n < sizeof first - 1)
            n++;
        memcpy (first, at, n);
        first[n] = '\0';
    }
    pthread_mutex_lock (&self->lock);
    if (seq >= self->attempts_room) {
        size_t room = self->attempts_room ? self->attempts_room : 1024;
        while (room <= seq)
            room *= 2;
        unsigned char *grown = realloc (self->attempts, room);
        if (!grown) {
            pthread_mutex_unlock (&self->lock);
            return FANHUB_RETRY;
        }
        memset (grown + self->attempts_room, 0, room - self->attempts_room);
        self->attempts = grown;
        self->attempts_room = room;
    }
    int attempt = self->attempts[seq] < 255 ? ++self->attempts[seq] : 255;
    pthread_mutex_unlock (&self->lock);
    fanhub_result_t answer = FANHUB_OK;
    if (self->retry_marker && attempt == 1
        && memmem (body.data, body.size, self->retry_marker, strlen (self->retry_marker)))
        answer = FANHUB_RETRY;
    if (self->fail_marker
        && memmem (body.data, body.size, self->fail_marker, strlen (self->fail_marker)))
        answer = FANHUB_FAIL;
    open_t item = {.answer = answer, .since = s_now ()};
    snprintf (item.line, sizeof item.line, "%llu %s %d ok\n", (unsigned long long) seq, first,
              attempt);
    if (!self->async) {
        if (answer == FANHUB_OK)
            s_write (self, item.line);
        return answer;
    }
    if (self->untaken_marker
        && memmem (body.data, body.size, self->untaken_marker, strlen (self->untaken_marker)))
        return FANHUB_PENDING; /* no msg_ticket: nothing can complete it */
    item.ticket = self->host->msg_ticket (msg);
    if (item.ticket == 0)
        return FANHUB_FAIL; /* the hub broke its promise: the test sees it */
    if (self->never_marker
        && memmem (body.data, body.size, self->never_marker, strlen (self->never_marker)))
        return FANHUB_PENDING; /* its ticket is forgotten */
    pthread_mutex_lock (&self->lock);
    if (self->count == self->room) {
        size_t room = self->room ? self->room * 2 : 256;
        open_t *grown = realloc (self->open, room * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock (&self->lock);
            return FANHUB_RETRY;
        }
        self->open = grown;
        self->room = room;
    }
    self->open[self->count++] = item;
    pthread_cond_signal (&self->wake);
    pthread_mutex_unlock (&self->lock);
    return FANHUB_PENDING;
}

static void
s_idle (void *state)
{
    journal_t *self = state;
    pthread_mutex_lock (&self->lock);
    self->flush = true;
    pthread_cond_signal (&self->wake);
    pthread_mutex_unlock (&self->lock);
}

static void
s_fini (void *state)
{
    journal_t *self = state;
    if (self->completer_started) {
        pthread_mutex_lock (&self->lock);
        self->stop = true;
        pthread_cond_signal (&self->wake);
        pthread_mutex_unlock (&self->lock);
        pthread_join (self->completer, NULL);
    }
    if (self->fd >= 0)
        close (self->fd);
    pthread_mutex_destroy (&self->lock);
    pthread_cond_destroy (&self->wake);
    free (self->open);
    free (self->attempts);
    free (self->hold_file);
    free (self->retry_marker);
    free (self->fail_marker);
    free (self->never_marker);
    free (self->untaken_marker);
    free (self);
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "journal", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .idle = s_idle, .fini = s_fini)
