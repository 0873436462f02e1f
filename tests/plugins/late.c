/*  late - a test consumer that completes its tickets late, from threads
    of its own that nobody waits for (issue 39, item 6).

    Options:
        delay_ms   integer 0..600000, default 1000: how long after consume
                   a ticket is completed (FANHUB_OK)
        done_file  a path: a line "TICKET\n" is appended to it once each
                   complete has returned

    consume answers FANHUB_PENDING and starts a detached thread that
    sleeps delay_ms and then calls host->complete with the ctx and ticket
    it was given. fini returns at once and does not wait for those
    threads: a hub that freed ctx with the consumer would be hit by the
    complete. Each thread owns what it uses (a copy of done_file), so it
    outlives the state freed by fini.
*/
#include <fanhub/consumer.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    long delay_ms;
    char *done_file; /* NULL when not set */
} late_state_t;

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    fanhub_ticket_t ticket;
    long delay_ms;
    char *done_file;
} late_job_t;

static void *
s_job (void *arg)
{
    late_job_t *job = arg;
    struct timespec ts
        = {.tv_sec = job->delay_ms / 1000, .tv_nsec = job->delay_ms % 1000 * 1000000};
    while (nanosleep (&ts, &ts) != 0 && errno == EINTR)
        ;
    job->host->complete (job->ctx, job->ticket, FANHUB_OK);
    if (job->done_file) {
        int fd = open (job->done_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd >= 0) {
            char line[32];
            int n = snprintf (line, sizeof line, "%llu\n", (unsigned long long) job->ticket);
            if (write (fd, line, (size_t) n) != n)
                (void) 0; /* the test sees the line missing */
            close (fd);
        }
    }
    free (job->done_file);
    free (job);
    return NULL;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    late_state_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "late: out of memory");
        return -1;
    }
    self->host = host;
    self->ctx = ctx;
    self->delay_ms = 1000;
    size_t count = options ? host->option_count (options) : 0;
    for (size_t i = 0; i < count; i++) {
        const char *key = NULL;
        const fanhub_option_t *node = host->option_at (options, i, &key);
        const char *text = host->option_scalar (node);
        char *end = NULL;
        if (key && strcmp (key, "delay_ms") == 0 && text && *text
            && (self->delay_ms = strtol (text, &end, 10)) >= 0 && self->delay_ms <= 600000 && !*end)
            continue;
        if (key && strcmp (key, "done_file") == 0 && text && *text) {
            free (self->done_file);
            self->done_file = strdup (text);
            continue;
        }
        snprintf (err, errlen, "options.%s: late takes delay_ms (0..600000) and done_file (%s)",
                  key ? key : "?", host->option_where (node));
        free (self->done_file);
        free (self);
        return -1;
    }
    *state = self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    late_state_t *self = state;
    late_job_t *job = calloc (1, sizeof *job);
    if (!job)
        return FANHUB_RETRY;
    *job = (late_job_t){self->host, self->ctx, self->host->msg_ticket (msg), self->delay_ms,
                        self->done_file ? strdup (self->done_file) : NULL};
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init (&attr);
    pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create (&thread, &attr, s_job, job);
    pthread_attr_destroy (&attr);
    if (rc != 0) {
        free (job->done_file);
        free (job);
        return FANHUB_RETRY;
    }
    return FANHUB_PENDING;
}

static void
s_fini (void *state)
{
    late_state_t *self = state;
    free (self->done_file);
    free (self);
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "late", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .fini = s_fini)
