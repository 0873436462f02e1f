/*  latency_plugin - a benchmark consumer: publish -> consume-start latency.

    Every message published with `fanhub pub --stamp` carries a third frame,
    the publisher's CLOCK_MONOTONIC send time in nanoseconds (8 bytes,
    little-endian). consume reads the clock first thing, subtracts the
    stamp and records the difference in a log-linear histogram
    (bench_hist.h). Publisher and hub must run on one machine: the
    monotonic clock is per boot.

    Options:
        path   required: at fini one JSON object is written there (aside,
               then renamed into place):
                 {"consumer":NAME,"no_stamp":M,"first_ns":..,"last_ns":..,
                  "count":N,"min_ns":..,"p50_ns":..,...,"buckets":[[i,c],...]}
               count is messages with a stamp, no_stamp those without one;
               first_ns/last_ns the monotonic times of the first and last
               consume calls.

    One instance per consumer, called from the consumer's own thread only,
    so the state needs no locks (not FANHUB_CONSUMER_THREAD_SAFE).
*/
#include "bench_hist.h"

#include <fanhub/consumer.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    char *path;
    uint64_t no_stamp;
    int64_t first_ns, last_ns;
    bench_hist_t hist;
} latency_state_t;

static inline int64_t
s_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    const char *path = NULL;
    size_t count = options ? host->option_count (options) : 0;
    for (size_t i = 0; i < count; i++) {
        const char *key = NULL;
        const fanhub_option_t *node = host->option_at (options, i, &key);
        const char *text = host->option_scalar (node);
        if (key && strcmp (key, "path") == 0 && text && *text)
            path = text;
        else {
            snprintf (err, errlen, "options.%s: unknown or empty; latency takes path (%s)",
                      key ? key : "?", host->option_where (node));
            return -1;
        }
    }
    if (!path) {
        snprintf (err, errlen, "options.path: required");
        return -1;
    }
    latency_state_t *self = malloc (sizeof *self);
    if (!self || !(self->path = strdup (path))) {
        free (self);
        snprintf (err, errlen, "latency: out of memory");
        return -1;
    }
    self->host = host;
    self->ctx = ctx;
    self->no_stamp = 0;
    self->first_ns = self->last_ns = 0;
    bench_hist_init (&self->hist);
    *state = self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    int64_t now = s_now_ns ();
    latency_state_t *self = state;
    if (!self->first_ns)
        self->first_ns = now;
    self->last_ns = now;
    fanhub_bytes_t stamp = self->host->msg_frame (msg, 2);
    int64_t sent = bench_stamp_decode (stamp.data, stamp.size);
    if (sent < 0)
        self->no_stamp++;
    else
        bench_hist_record (&self->hist, now - sent);
    return FANHUB_OK;
}

static void
s_fini (void *state)
{
    latency_state_t *self = state;
    char tmp[4096];
    int n = snprintf (tmp, sizeof tmp, "%s.tmp", self->path);
    FILE *f = n > 0 && (size_t) n < sizeof tmp ? fopen (tmp, "w") : NULL;
    bool ok = f != NULL;
    if (f) {
        fprintf (f, "{\"consumer\":\"%s\",\"no_stamp\":%llu,\"first_ns\":%lld,\"last_ns\":%lld,",
                 self->host->consumer_name (self->ctx), (unsigned long long) self->no_stamp,
                 (long long) self->first_ns, (long long) self->last_ns);
        bench_hist_write_json (&self->hist, f);
        fputs ("}\n", f);
        if (ferror (f))
            ok = false;
        if (fclose (f) != 0)
            ok = false;
    }
    if (!ok || rename (tmp, self->path) != 0)
        self->host->log (self->ctx, FANHUB_LOG_ERROR, "%s: cannot write", self->path);
    free (self->path);
    free (self);
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "latency", .version = "1.0", .init = s_init,
                        .consume = s_consume, .fini = s_fini)
