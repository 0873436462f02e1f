/*  badtext - a test consumer whose error text is hard to keep whole
    (issue 39, item 10).

    Options:
        pad    integer 0..4096, default 0: ASCII bytes ('a') before tail
        tail   a string, default "é": what follows them
        raw    true: tail's bytes as \xHH escapes read ("\xff" and so
               on), so that text that is not UTF-8 at all can be given

    init reports state DOWN with the error pad + tail (host->set_state),
    so the hub's cut of a long error lands inside tail's character when
    pad is near the cut; consume answers FANHUB_OK.
*/
#include <fanhub/consumer.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    long pad = 0;
    const char *tail = "\xc3\xa9"; /* é */
    int raw = 0;
    size_t count = options ? host->option_count (options) : 0;
    for (size_t i = 0; i < count; i++) {
        const char *key = NULL;
        const fanhub_option_t *node = host->option_at (options, i, &key);
        const char *text = host->option_scalar (node);
        char *end = NULL;
        if (key && text && strcmp (key, "pad") == 0 && (pad = strtol (text, &end, 10)) >= 0
            && pad <= 4096 && *text && !*end)
            continue;
        if (key && text && strcmp (key, "tail") == 0) {
            tail = text;
            continue;
        }
        if (key && text && strcmp (key, "raw") == 0) {
            raw = strcmp (text, "true") == 0;
            continue;
        }
        snprintf (err, errlen, "options.%s: badtext takes pad, tail and raw (%s)", key ? key : "?",
                  host->option_where (node));
        return -1;
    }
    size_t tail_len = strlen (tail);
    char *error = malloc ((size_t) pad + tail_len + 1);
    if (!error) {
        snprintf (err, errlen, "badtext: out of memory");
        return -1;
    }
    memset (error, 'a', (size_t) pad);
    size_t n = (size_t) pad;
    for (const char *p = tail; *p; p++) {
        unsigned byte;
        if (raw && p[0] == '\\' && p[1] == 'x' && sscanf (p + 2, "%2x", &byte) == 1) {
            error[n++] = (char) byte;
            p += 3;
        }
        else
            error[n++] = *p;
    }
    error[n] = '\0';
    host->set_state (ctx, FANHUB_STATE_DOWN, "%s", error);
    free (error);
    *state = NULL;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    (void) state, (void) msg;
    return FANHUB_OK;
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "badtext", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume)
