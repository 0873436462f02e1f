/*  bench_hist - a log-linear latency histogram for the benchmarks.

    Header only, shared by bench_raw and the latency plugin so that both
    sides of a comparison bucket their samples the same way. A value v (ns)
    goes to bucket v when v < 256; above, to the bucket of its top 8
    significant bits: relative error below 1/128 (0.8 %), 7424 buckets
    cover all of uint64. bench.py re-implements bench_hist_low/high to merge
    the sparse bucket lists the programs print, so keep them in step.

    Not thread-safe: one writer, read after it stops.
*/
#ifndef BENCH_HIST_H_INCLUDED
#define BENCH_HIST_H_INCLUDED

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define BENCH_HIST_SUB_BITS 7
#define BENCH_HIST_SUB (1u << BENCH_HIST_SUB_BITS) /* 128 */
#define BENCH_HIST_BUCKETS ((64 - BENCH_HIST_SUB_BITS) * BENCH_HIST_SUB + BENCH_HIST_SUB)

typedef struct {
    uint64_t counts[BENCH_HIST_BUCKETS];
    uint64_t count;
    uint64_t min, max;
    double sum;
} bench_hist_t;

static inline void
bench_hist_init (bench_hist_t *self)
{
    memset (self, 0, sizeof *self);
    self->min = UINT64_MAX;
}

static inline unsigned
bench_hist_index (uint64_t v)
{
    if (v < 2 * BENCH_HIST_SUB)
        return (unsigned) v;
    unsigned msb = 63u - (unsigned) __builtin_clzll (v);
    unsigned shift = msb - BENCH_HIST_SUB_BITS; /* >= 1 */
    return shift * BENCH_HIST_SUB + (unsigned) (v >> shift);
}

/* The smallest value of bucket i. */
static inline uint64_t
bench_hist_low (unsigned i)
{
    if (i < 2 * BENCH_HIST_SUB)
        return i;
    unsigned shift = i / BENCH_HIST_SUB - 1;
    uint64_t mant = i - shift * BENCH_HIST_SUB; /* 128..255 */
    return mant << shift;
}

static inline void
bench_hist_record (bench_hist_t *self, int64_t value)
{
    uint64_t v = value < 0 ? 0 : (uint64_t) value;
    self->counts[bench_hist_index (v)]++;
    self->count++;
    self->sum += (double) v;
    if (v < self->min)
        self->min = v;
    if (v > self->max)
        self->max = v;
}

/* The value at quantile q (0..1): the middle of the bucket holding that
   rank, never above the largest sample. 0 when empty. */
static inline uint64_t
bench_hist_quantile (const bench_hist_t *self, double q)
{
    if (self->count == 0)
        return 0;
    uint64_t rank = (uint64_t) (q * (double) self->count + 0.999999);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++) {
        seen += self->counts[i];
        if (seen >= rank) {
            uint64_t low = bench_hist_low (i);
            uint64_t high = i + 1 < BENCH_HIST_BUCKETS ? bench_hist_low (i + 1) : UINT64_MAX;
            uint64_t mid = low + (high - low) / 2;
            return mid > self->max ? self->max : mid < self->min ? self->min : mid;
        }
    }
    return self->max;
}

/* Writes the histogram as JSON members (no braces):
   "count":N,"min_ns":..,"mean_ns":..,"p50_ns":..,"p90_ns":..,"p99_ns":..,
   "p999_ns":..,"max_ns":..,"buckets":[[i,c],...] (non-empty buckets). */
static inline void
bench_hist_write_json (const bench_hist_t *self, FILE *out)
{
    fprintf (out,
             "\"count\":%llu,\"min_ns\":%llu,\"mean_ns\":%.1f,\"p50_ns\":%llu,"
             "\"p90_ns\":%llu,\"p99_ns\":%llu,\"p999_ns\":%llu,\"max_ns\":%llu,"
             "\"buckets\":[",
             (unsigned long long) self->count, (unsigned long long) (self->count ? self->min : 0),
             self->count ? self->sum / (double) self->count : 0.0,
             (unsigned long long) bench_hist_quantile (self, 0.50),
             (unsigned long long) bench_hist_quantile (self, 0.90),
             (unsigned long long) bench_hist_quantile (self, 0.99),
             (unsigned long long) bench_hist_quantile (self, 0.999),
             (unsigned long long) self->max);
    const char *sep = "";
    for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++)
        if (self->counts[i]) {
            fprintf (out, "%s[%u,%llu]", sep, i, (unsigned long long) self->counts[i]);
            sep = ",";
        }
    fputs ("]", out);
}

/* The little-endian u64 of a stamp frame, or -1 when it is not 8 bytes. */
static inline int64_t
bench_stamp_decode (const void *data, size_t size)
{
    if (!data || size != 8)
        return -1;
    const uint8_t *b = (const uint8_t *) data;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | b[i];
    return (int64_t) v;
}

#endif
