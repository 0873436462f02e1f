/*  fdhog - a test consumer that fills the hub's descriptor table, so that
    a test can see what the hub does with a connection it has no
    descriptor for.

    Options:
        leave   integer 0..1000, default 0: how many descriptors a "take"
                leaves free

    A message whose body is "take" opens /dev/null until the table is
    full, then closes `leave` of them; one whose body is "give" closes
    them all (fini does too). Other bodies are ignored. Answers FANHUB_OK.
    Not thread-safe: one consumer thread calls it.
*/
#include <fanhub/consumer.h>

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const fanhub_host_t *host;
    long leave;
    int *fds;
    size_t count, size;
} fdhog_state_t;

static void
s_give (fdhog_state_t *self)
{
    while (self->count > 0)
        close (self->fds[--self->count]);
}

static void
s_take (fdhog_state_t *self)
{
    for (;;) {
        if (self->count == self->size) {
            size_t size = self->size ? self->size * 2 : 256;
            int *fds = realloc (self->fds, size * sizeof *fds);
            if (!fds)
                break;
            self->fds = fds;
            self->size = size;
        }
        int fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            break; /* EMFILE: the table is full */
        self->fds[self->count++] = fd;
    }
    for (long i = 0; i < self->leave && self->count > 0; i++)
        close (self->fds[--self->count]);
}

static bool
s_body_is (const fdhog_state_t *self, const fanhub_msg_t *msg, const char *text)
{
    fanhub_bytes_t body = self->host->msg_body (msg);
    return body.size == strlen (text) && memcmp (body.data, text, body.size) == 0;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    (void) ctx;
    long leave = 0;
    size_t count = options ? host->option_count (options) : 0;
    for (size_t i = 0; i < count; i++) {
        const char *key = NULL;
        const fanhub_option_t *node = host->option_at (options, i, &key);
        const char *text = host->option_scalar (node);
        if (key && strcmp (key, "leave") == 0 && text && *text && strlen (text) <= 4
            && strspn (text, "0123456789") == strlen (text) && atol (text) <= 1000)
            leave = atol (text);
        else {
            snprintf (err, errlen, "options.%s: fdhog takes leave, an integer 0..1000 (%s)",
                      key ? key : "?", host->option_where (node));
            return -1;
        }
    }
    fdhog_state_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "fdhog: out of memory");
        return -1;
    }
    self->host = host;
    self->leave = leave;
    *state = self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    fdhog_state_t *self = state;
    if (s_body_is (self, msg, "take"))
        s_take (self);
    else if (s_body_is (self, msg, "give"))
        s_give (self);
    return FANHUB_OK;
}

static void
s_fini (void *state)
{
    fdhog_state_t *self = state;
    s_give (self);
    free (self->fds);
    free (self);
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "fdhog", .version = "1.0", .init = s_init,
                        .consume = s_consume, .fini = s_fini)
