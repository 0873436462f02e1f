/*  record - a thread-safe test plugin that records every consume call, for
    checking order and exclusivity in execution order.

    options:
      path: FILE       at fini, one line per call: "SEQ START_NS END_NS ATTEMPT ANSWER"
                       in the order the calls started
      us_max: N        sleep a pseudo-random 0..N microseconds in each call
      retry_marker: S  a body containing S is answered RETRY on its first two
                       attempts, then OK
      release_file: F  each call first waits (1 ms polls) until F exists
      fail_marker: S   a body containing S is answered FAIL
*/
#define _GNU_SOURCE 1 /* memmem */
#include <fanhub/consumer.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    uint64_t seq;
    int64_t start, end;
    int attempt;
    fanhub_result_t answer;
} call_t;

typedef struct {
    const fanhub_host_t *host;
    char *path;
    long us_max;
    char *retry_marker;
    char *release_file;
    char *fail_marker;
    pthread_mutex_t lock;
    call_t *calls;
    size_t count, room;
    /* attempts per seq, for retry_marker (seq < room_attempts) */
    unsigned char *attempts;
    size_t room_attempts;
} record_t;

static int64_t
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    (void) ctx;
    record_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    self->host = host;
    pthread_mutex_init (&self->lock, NULL);
    for (size_t i = 0; i < host->option_count (options); i++) {
        const char *key;
        const char *text = host->option_scalar (host->option_at (options, i, &key));
        if (!text)
            continue;
        if (strcmp (key, "path") == 0)
            self->path = strdup (text);
        else if (strcmp (key, "us_max") == 0)
            self->us_max = strtol (text, NULL, 10);
        else if (strcmp (key, "retry_marker") == 0)
            self->retry_marker = strdup (text);
        else if (strcmp (key, "release_file") == 0)
            self->release_file = strdup (text);
        else if (strcmp (key, "fail_marker") == 0)
            self->fail_marker = strdup (text);
        else {
            snprintf (err, errlen, "options.%s: unknown option", key);
            free (self);
            return -1;
        }
    }
    if (!self->path) {
        snprintf (err, errlen, "options.path: required");
        free (self);
        return -1;
    }
    *state = self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    record_t *self = state;
    uint64_t seq = self->host->msg_seq (msg);
    while (self->release_file && access (self->release_file, F_OK) != 0) {
        struct timespec ms = {0, 1000000};
        nanosleep (&ms, NULL);
    }
    call_t call = {.seq = seq, .start = s_now (), .answer = FANHUB_OK, .attempt = 1};
    fanhub_bytes_t body = self->host->msg_body (msg);
    pthread_mutex_lock (&self->lock);
    if (seq >= self->room_attempts) {
        size_t room = self->room_attempts ? self->room_attempts : 1024;
        while (room <= seq)
            room *= 2;
        unsigned char *grown = realloc (self->attempts, room);
        memset (grown + self->room_attempts, 0, room - self->room_attempts);
        self->attempts = grown;
        self->room_attempts = room;
    }
    call.attempt = ++self->attempts[seq];
    pthread_mutex_unlock (&self->lock);
    if (self->retry_marker && call.attempt <= 2
        && memmem (body.data, body.size, self->retry_marker, strlen (self->retry_marker)))
        call.answer = FANHUB_RETRY;
    if (self->fail_marker
        && memmem (body.data, body.size, self->fail_marker, strlen (self->fail_marker)))
        call.answer = FANHUB_FAIL;
    if (self->us_max > 0) {
        long us = (long) ((seq * 2654435761u + (uint64_t) call.attempt)
                          % (uint64_t) (self->us_max + 1));
        struct timespec ts = {0, us * 1000};
        nanosleep (&ts, NULL);
    }
    call.end = s_now ();
    pthread_mutex_lock (&self->lock);
    if (self->count == self->room) {
        self->room = self->room ? self->room * 2 : 4096;
        self->calls = realloc (self->calls, self->room * sizeof *self->calls);
    }
    self->calls[self->count++] = call;
    pthread_mutex_unlock (&self->lock);
    return call.answer;
}

static int
s_by_start (const void *a, const void *b)
{
    const call_t *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static void
s_fini (void *state)
{
    record_t *self = state;
    /* Sorted by start time: the execution order the test checks. */
    qsort (self->calls, self->count, sizeof *self->calls, s_by_start);
    char tmp[4096];
    snprintf (tmp, sizeof tmp, "%s.tmp", self->path);
    FILE *out = fopen (tmp, "w");
    if (out) {
        for (size_t i = 0; i < self->count; i++) {
            call_t *c = &self->calls[i];
            fprintf (out, "%llu %lld %lld %d %s\n", (unsigned long long) c->seq,
                     (long long) c->start, (long long) c->end, c->attempt,
                     c->answer == FANHUB_OK      ? "ok"
                     : c->answer == FANHUB_RETRY ? "retry"
                                                 : "fail");
        }
        fclose (out);
        rename (tmp, self->path);
    }
    pthread_mutex_destroy (&self->lock);
    free (self->calls);
    free (self->attempts);
    free (self->path);
    free (self->retry_marker);
    free (self->release_file);
    free (self->fail_marker);
    free (self);
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "record", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .fini = s_fini)
