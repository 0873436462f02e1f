/*  host - the host table the hub hands every plugin (fanhub_host_t).

    One constant table for all consumers; what differs per consumer is the
    fanhub_ctx_t passed alongside, which names the consumer for log lines.
*/
#ifndef FH_HOST_H_INCLUDED
#define FH_HOST_H_INCLUDED

#include "fanhub/consumer.h"

typedef struct fh_consumer fh_consumer_t;

struct fanhub_ctx {
    const char *consumer_name;
    fh_consumer_t *consumer; /* for host->complete; NULL in tests' fake hosts */
};

extern const fanhub_host_t fh_host;

#endif
