/*  host - the host table the hub hands every plugin (fanhub_host_t).

    One constant table for all consumers; what differs per consumer is the
    fanhub_ctx_t passed alongside (host_ctx.h), which names the consumer
    for log lines and leads the calls that reach it there.

    The table calls the consumer (complete, settings, state, counters,
    publish, windows); the consumer never calls the table: whoever makes
    an instance hands it the table (fh_consumer_new's host: hub.c, and
    config/reload_init.c for a reload's), so the dependency runs one way.
*/
#ifndef FH_HOST_H_INCLUDED
#define FH_HOST_H_INCLUDED

#include "fanhub/consumer.h"
#include "host_ctx.h"

extern const fanhub_host_t fh_host;

#endif
