/*  sleep - a test consumer that is slow on purpose, or holds messages.

    Options:
        ms            integer 0..3600000: sleeps this long per message
                      (default 10, or 0 when release_file is set)
        release_file  a path: consume blocks until that file exists; so a
                      test can hold messages in the consumer (backlog,
                      overflow, shutdown) and let them go by creating the
                      file. It waits on inotify, not by polling: a held
                      consumer beside a measured one (scripts/bench's
                      neighbour case) must not cost the CPU it shares

    Writes nothing, answers FANHUB_OK. The state is read-only after init,
    so it is thread-safe.
*/
#include <fanhub/consumer.h>

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    long ms;
    char *release_file; /* NULL when not set */
} sleep_state_t;

static void
s_sleep_ns (long ns)
{
    struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
    while (nanosleep (&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Returns once path exists. Watches its directory for names appearing;
   the poll's timeout covers an event missed (the directory replaced), and
   without inotify it falls back to polling every 10 ms. */
static void
s_wait_for_file (const char *path)
{
    if (access (path, F_OK) == 0)
        return;
    char dir[4096];
    const char *slash = strrchr (path, '/');
    if (!slash)
        snprintf (dir, sizeof dir, ".");
    else
        snprintf (dir, sizeof dir, "%.*s", slash == path ? 1 : (int) (slash - path), path);
    int fd = inotify_init1 (IN_CLOEXEC | IN_NONBLOCK);
    if (fd >= 0 && inotify_add_watch (fd, dir, IN_CREATE | IN_MOVED_TO | IN_ATTRIB) < 0) {
        close (fd);
        fd = -1;
    }
    while (access (path, F_OK) != 0) {
        if (fd < 0) {
            s_sleep_ns (10 * 1000000);
            continue;
        }
        struct pollfd ready = {.fd = fd, .events = POLLIN};
        if (poll (&ready, 1, 200) > 0) {
            char events[4096];
            while (read (fd, events, sizeof events) > 0)
                ; /* drained: which name it was, access() says */
        }
    }
    if (fd >= 0)
        close (fd);
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    (void) ctx;
    long ms = -1;
    const char *release_file = NULL;
    size_t count = options ? host->option_count (options) : 0;
    for (size_t i = 0; i < count; i++) {
        const char *key = NULL;
        const fanhub_option_t *node = host->option_at (options, i, &key);
        const char *text = host->option_scalar (node);
        const char *where = host->option_where (node);
        if (key && strcmp (key, "ms") == 0) {
            bool ok = text && *text && strlen (text) <= 7
                      && strspn (text, "0123456789") == strlen (text);
            ms = ok ? strtol (text, NULL, 10) : -1;
            if (ms < 0 || ms > 3600000) {
                snprintf (err, errlen,
                          "options.ms: expected an integer from 0 to 3600000 "
                          "(%s)",
                          where);
                return -1;
            }
        }
        else if (key && strcmp (key, "release_file") == 0) {
            if (!text || !*text) {
                snprintf (err, errlen, "options.release_file: expected a path (%s)", where);
                return -1;
            }
            release_file = text;
        }
        else {
            snprintf (err, errlen,
                      "options.%s: unknown option; sleep takes ms and "
                      "release_file (%s)",
                      key ? key : "?", where);
            return -1;
        }
    }
    sleep_state_t *self = (sleep_state_t *) calloc (1, sizeof *self);
    if (!self || (release_file && !(self->release_file = strdup (release_file)))) {
        free (self);
        snprintf (err, errlen, "sleep: out of memory");
        return -1;
    }
    self->ms = ms >= 0 ? ms : release_file ? 0 : 10;
    *state = self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    (void) msg;
    sleep_state_t *self = (sleep_state_t *) state;
    if (self->release_file)
        s_wait_for_file (self->release_file);
    if (self->ms > 0)
        s_sleep_ns (self->ms * 1000000);
    return FANHUB_OK;
}

static void
s_fini (void *state)
{
    sleep_state_t *self = (sleep_state_t *) state;
    free (self->release_file);
    free (self);
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "sleep", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .fini = s_fini)
