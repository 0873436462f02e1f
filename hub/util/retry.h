/*  retry - how long to wait before trying a message again.

    Exponential backoff: the delay before retry n (n = 1 for the first
    retry) is initial * 2^(n-1), capped at max, then moved by a random
    share of up to +-jitter, so that consumers failing together do not
    retry together. Pure: the caller passes the random state, so tests
    pin every delay.
*/
#ifndef FH_RETRY_H_INCLUDED
#define FH_RETRY_H_INCLUDED

#include "config.h"

#include <stdint.h>

/* The delay before retry `retry` (>= 1), in ms. rng: xorshift state, never 0. */
int64_t fh_retry_delay_ms (const fh_retry_config_t *config, uint32_t retry, uint64_t *rng);

/* A seed for the random state (never 0). */
uint64_t fh_retry_seed (uint64_t salt);

#endif
