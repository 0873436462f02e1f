/*  retry - backoff delays. See retry.h. */
#include "retry.h"

static uint64_t
s_next (uint64_t *state)
{
    /* xorshift64*: small, fast, good enough to spread retries. */
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * UINT64_C (2685821657736338717);
}

uint64_t
fh_retry_seed (uint64_t salt)
{
    uint64_t seed = salt * UINT64_C (0x9E3779B97F4A7C15) + 1;
    return seed ? seed : 1;
}

int64_t
fh_retry_delay_ms (const fh_retry_config_t *config, uint32_t retry, uint64_t *rng)
{
    int64_t delay = config->initial_ms;
    for (uint32_t i = 1; i < retry && delay < config->max_ms; i++)
        delay *= 2;
    if (delay > config->max_ms)
        delay = config->max_ms;
    if (config->jitter_permille > 0 && delay > 0) {
        /* A uniform share in [-jitter, +jitter] of the delay. */
        int64_t span = delay * config->jitter_permille / 1000;
        uint64_t draw = s_next (rng) % (uint64_t) (2 * span + 1);
        delay += (int64_t) draw - span;
    }
    return delay < 0 ? 0 : delay;
}
