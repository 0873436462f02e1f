/*  host - the host table the hub hands every plugin (fanhub_host_t).

    One constant table for all consumers; what differs per consumer is the
    fanhub_ctx_t passed alongside, which names the consumer for log lines.
*/
#ifndef FH_HOST_H_INCLUDED
#define FH_HOST_H_INCLUDED

#include "fanhub/consumer.h"

#include <stddef.h>

typedef struct fh_consumer fh_consumer_t;

struct fanhub_ctx {
    const char *consumer_name;
    fh_consumer_t *consumer;            /* for host->complete; NULL in tests' fake hosts */
    const fanhub_consumer_desc_t *desc; /* the plugin's, for host->options_load */
};

extern const fanhub_host_t fh_host;

/* The reason the plugin gave with host->set_reason on this thread since
   the last call (copied into reason, "" when none), and forgets it. The
   consumer runtime calls it after each consume. */
void fh_host_take_reason (char *reason, size_t size);

/* The option table of a descriptor (ABI 1.2), or NULL when it has none
   or is too short to hold one (built against an older ABI). */
const fanhub_opt_t *fh_host_desc_options (const fanhub_consumer_desc_t *desc);

#endif
