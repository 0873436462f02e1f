/*  flaky - a test plugin that answers RETRY a set number of times for each
    message before OK (or FAIL), and records every call.

    options:
      retries: K     answer RETRY K times per message, then the final answer
      final: ok|fail the answer after the retries (default ok)
      path: FILE     appends "SEQ ATTEMPT ANSWER\n" for every call (optional)
    One instance is called from one thread (workers: 1).
*/
#include <fanhub/consumer.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const fanhub_host_t *host;
    long retries;
    fanhub_result_t final;
    FILE *out;
    uint64_t seq;  /* the message being retried */
    long attempts; /* calls for it so far */
} flaky_t;

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    (void) ctx;
    flaky_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    self->host = host;
    self->final = FANHUB_OK;
    for (size_t i = 0; i < host->option_count (options); i++) {
        const char *key;
        const fanhub_option_t *value = host->option_at (options, i, &key);
        const char *text = host->option_scalar (value);
        if (strcmp (key, "retries") == 0 && text)
            self->retries = strtol (text, NULL, 10);
        else if (strcmp (key, "final") == 0 && text)
            self->final = strcmp (text, "fail") == 0 ? FANHUB_FAIL : FANHUB_OK;
        else if (strcmp (key, "path") == 0 && text) {
            self->out = fopen (text, "a");
            if (!self->out) {
                snprintf (err, errlen, "options.path: cannot open %s", text);
                free (self);
                return -1;
            }
        }
        else {
            snprintf (err, errlen, "options.%s: unknown option (%s)", key,
                      host->option_where (value));
            if (self->out)
                fclose (self->out);
            free (self);
            return -1;
        }
    }
    *state = self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    flaky_t *self = state;
    uint64_t seq = self->host->msg_seq (msg);
    if (seq != self->seq) {
        self->seq = seq;
        self->attempts = 0;
    }
    self->attempts++;
    fanhub_result_t answer = self->attempts <= self->retries ? FANHUB_RETRY : self->final;
    if (self->out) {
        fprintf (self->out, "%llu %ld %s\n", (unsigned long long) seq, self->attempts,
                 answer == FANHUB_OK      ? "ok"
                 : answer == FANHUB_RETRY ? "retry"
                                          : "fail");
        fflush (self->out);
    }
    return answer;
}

static void
s_fini (void *state)
{
    flaky_t *self = state;
    if (self->out)
        fclose (self->out);
    free (self);
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "flaky", .version = "1.0", .init = s_init,
                        .consume = s_consume, .fini = s_fini)
