/*  count - a test consumer that counts its messages.

    Options:
        path        required: at fini the count is written there as
                    "COUNT\n" (written aside and renamed into place, so a
                    reader never sees it half written), so a test can check
                    how many messages a consumer got without parsing a log
        fail_every  integer K >= 0, default 0: every K-th call answers
                    FANHUB_FAIL (0 = never)

    COUNT is the number of consume calls, failed ones included (a retried
    message counts once per call). Counting is atomic, so the plugin is
    thread-safe.
*/
#include <fanhub/consumer.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    char *path;
    unsigned long fail_every;
    atomic_ulong count;
} count_state_t;

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    const char *path = NULL;
    unsigned long fail_every = 0;
    size_t count = options ? host->option_count (options) : 0;
    for (size_t i = 0; i < count; i++) {
        const char *key = NULL;
        const fanhub_option_t *node = host->option_at (options, i, &key);
        const char *text = host->option_scalar (node);
        const char *where = host->option_where (node);
        if (key && strcmp (key, "path") == 0) {
            if (!text || !*text) {
                snprintf (err, errlen, "options.path: expected a path (%s)", where);
                return -1;
            }
            path = text;
        }
        else if (key && strcmp (key, "fail_every") == 0) {
            if (!text || !*text || strlen (text) > 9
                || strspn (text, "0123456789") != strlen (text)) {
                snprintf (err, errlen, "options.fail_every: expected an integer >= 0 (%s)", where);
                return -1;
            }
            fail_every = strtoul (text, NULL, 10);
        }
        else {
            snprintf (err, errlen,
                      "options.%s: unknown option; count takes path and "
                      "fail_every (%s)",
                      key ? key : "?", where);
            return -1;
        }
    }
    if (!path) {
        snprintf (err, errlen, "options.path: required");
        return -1;
    }
    count_state_t *self = (count_state_t *) calloc (1, sizeof *self);
    if (!self || !(self->path = strdup (path))) {
        free (self);
        snprintf (err, errlen, "count: out of memory");
        return -1;
    }
    self->host = host;
    self->ctx = ctx;
    self->fail_every = fail_every;
    atomic_init (&self->count, 0);
    *state = self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    (void) msg;
    count_state_t *self = (count_state_t *) state;
    unsigned long n = atomic_fetch_add (&self->count, 1) + 1;
    if (self->fail_every && n % self->fail_every == 0)
        return FANHUB_FAIL;
    return FANHUB_OK;
}

static void
s_fini (void *state)
{
    count_state_t *self = (count_state_t *) state;
    char tmp[4096];
    int n = snprintf (tmp, sizeof tmp, "%s.tmp", self->path);
    FILE *f = n > 0 && (size_t) n < sizeof tmp ? fopen (tmp, "w") : NULL;
    bool ok = f && fprintf (f, "%lu\n", atomic_load (&self->count)) > 0;
    if (f && fclose (f) != 0)
        ok = false;
    if (!ok || rename (tmp, self->path) != 0)
        self->host->log (self->ctx, FANHUB_LOG_ERROR, "%s: cannot write", self->path);
    free (self->path);
    free (self);
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "count", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .fini = s_fini)
