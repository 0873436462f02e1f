/*  crash - a test consumer that dies inside consume, on purpose.

    Options:
        how      none (default), segv, abort, exit or recurse: what the call
                 after `after` messages does (none: answers FANHUB_OK
                 forever; recurse: recurses until the thread's stack
                 overflows)
        after    integer >= 0, default 0: messages answered OK first
        code     integer 0..255, default 7: the status of exit
        ballast  anything: ignored (a test's large option)
        marker   a string: only a message whose body contains it dies
                 (`after` is not counted then)
        seen     a file: each body answered OK is appended to it, one line
        gate     a file: each call first waits (1 ms polls) until it exists
        in       consume (default), init or fini: the call that dies with
                 SIGSEGV (init and fini die at once, whatever `how` says)

    The count is atomic, so the plugin is thread-safe.
*/
#define _GNU_SOURCE 1 /* memmem */
#include <fanhub/consumer.h>

#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

typedef enum { HOW_NONE, HOW_SEGV, HOW_ABORT, HOW_EXIT, HOW_RECURSE } how_t;

typedef struct {
    how_t how;
    long after;
    int code;
    atomic_long seen;
    const fanhub_host_t *host;
    char *marker;
    char *gate;
    char in[8];  /* "consume", "init" or "fini" */
    int seen_fd; /* -1 without `seen` */
} crash_state_t;

static int
s_number (const fanhub_host_t *host, const fanhub_option_t *node, long max, long *out, char *err,
          size_t errlen, const char *key)
{
    const char *text = host->option_scalar (node);
    char *end = NULL;
    long value = text ? strtol (text, &end, 10) : -1;
    if (!text || !*text || *end || value < 0 || value > max) {
        snprintf (err, errlen, "options.%s: expected an integer from 0 to %ld (%s)", key, max,
                  host->option_where (node));
        return -1;
    }
    *out = value;
    return 0;
}

static void
s_fini (void *state)
{
    crash_state_t *self = state;
    if (self->seen_fd >= 0)
        close (self->seen_fd);
    free (self->marker);
    free (self->gate);
    free (self);
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    (void) ctx;
    crash_state_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "crash: out of memory");
        return -1;
    }
    self->code = 7;
    self->seen_fd = -1;
    snprintf (self->in, sizeof self->in, "consume");
    self->host = host;
    size_t count = options ? host->option_count (options) : 0;
    for (size_t i = 0; i < count; i++) {
        const char *key = NULL;
        const fanhub_option_t *node = host->option_at (options, i, &key);
        const char *text = host->option_scalar (node);
        long number = 0;
        int rc = 0;
        if (key && strcmp (key, "how") == 0) {
            static const char *const words[] = {"none", "segv", "abort", "exit", "recurse"};
            rc = -1;
            for (int w = 0; w < 5; w++)
                if (text && strcmp (text, words[w]) == 0) {
                    self->how = (how_t) w;
                    rc = 0;
                }
            if (rc)
                snprintf (err, errlen,
                          "options.how: expected none, segv, abort, exit or "
                          "recurse (%s)",
                          host->option_where (node));
        }
        else if (key && strcmp (key, "after") == 0)
            rc = s_number (host, node, 1000000000, &self->after, err, errlen, key);
        else if (key && strcmp (key, "code") == 0) {
            rc = s_number (host, node, 255, &number, err, errlen, key);
            self->code = (int) number;
        }
        else if (key && text && strcmp (key, "marker") == 0)
            self->marker = strdup (text);
        else if (key && text && strcmp (key, "gate") == 0)
            self->gate = strdup (text);
        else if (key && text && strcmp (key, "in") == 0
                 && (!strcmp (text, "consume") || !strcmp (text, "init") || !strcmp (text, "fini")))
            snprintf (self->in, sizeof self->in, "%s", text);
        else if (key && text && strcmp (key, "seen") == 0) {
            self->seen_fd = open (text, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
            if (self->seen_fd < 0) {
                snprintf (err, errlen, "options.seen: cannot open %s", text);
                rc = -1;
            }
        }
        else if (!key || strcmp (key, "ballast") != 0) {
            snprintf (err, errlen,
                      "options.%s: unknown option; crash takes how, after, code, "
                      "ballast, marker, seen, gate and in (%s)",
                      key ? key : "?", host->option_where (node));
            rc = -1;
        }
        if (rc) {
            s_fini (self);
            return -1;
        }
    }
    if (strcmp (self->in, "init") == 0)
        raise (SIGSEGV);
    *state = self;
    return 0;
}

static void
s_fini_call (void *state)
{
    if (strcmp (((crash_state_t *) state)->in, "fini") == 0)
        raise (SIGSEGV);
    s_fini (state);
}

/* Never reached: keeps the compiler from calling the recursion infinite
   (or turning it into a loop). */
static volatile long s_depth_limit = -1;

/* A small frame per call, each touched, used after the call returns (no
   tail call), never inlined: the first fault is at the top of the guard
   page, where no signal frame fits without an alternate stack. */
__attribute__ ((noinline)) static long
s_recurse (volatile char *caller, long depth)
{
    volatile char frame[256];
    frame[0] = caller ? (char) (caller[0] + 1) : 0;
    if (depth == s_depth_limit)
        return frame[0];
    return s_recurse (frame, depth + 1) + frame[depth % (long) sizeof frame];
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    crash_state_t *self = (crash_state_t *) state;
    while (self->gate && access (self->gate, F_OK) != 0) {
        struct timespec ms = {0, 1000000};
        nanosleep (&ms, NULL);
    }
    fanhub_bytes_t body = self->host->msg_body (msg);
    bool dies = self->marker
                    ? memmem (body.data, body.size, self->marker, strlen (self->marker)) != NULL
                    : atomic_fetch_add (&self->seen, 1) >= self->after;
    dies = dies && self->how != HOW_NONE && strcmp (self->in, "consume") == 0;
    if (!dies) {
        if (self->seen_fd >= 0) {
            struct iovec parts[] = {{(void *) body.data, body.size}, {"\n", 1}};
            if (writev (self->seen_fd, parts, 2) < 0)
                return FANHUB_FAIL;
        }
        return FANHUB_OK;
    }
    switch (self->how) {
    case HOW_SEGV:
        raise (SIGSEGV); /* as a wild pointer would, without UB in the test */
        break;
    case HOW_ABORT: abort ();
    case HOW_EXIT: exit (self->code);
    case HOW_RECURSE: return s_recurse (NULL, 0) == 1 ? FANHUB_FAIL : FANHUB_OK;
    case HOW_NONE: break;
    }
    return FANHUB_OK;
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "crash", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .fini = s_fini_call)
