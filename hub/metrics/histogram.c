/*  histogram - latency histogram with log-spaced buckets. See histogram.h.

    Bucket of v: values below 16 map to themselves (one bucket per
    nanosecond); above, e = floor(log2 v) and the next 4 bits below the top
    bit select one of 16 sub-buckets: index = (e - 3) * 16 + m.
*/
#include "histogram.h"

#include <string.h>

static inline void
s_store (atomic_uint_fast64_t *cell, uint64_t value)
{
    atomic_store_explicit (cell, value, memory_order_relaxed);
}

static inline uint64_t
s_load (atomic_uint_fast64_t *cell)
{
    return atomic_load_explicit (cell, memory_order_relaxed);
}

unsigned
fh_histogram_bucket (uint64_t v)
{
    if (v < FH_HISTOGRAM_SUBS)
        return (unsigned) v;
    unsigned e = 63u - (unsigned) __builtin_clzll (v);
    unsigned m = (unsigned) (v >> (e - FH_HISTOGRAM_SUB_BITS)) & (FH_HISTOGRAM_SUBS - 1);
    unsigned index = (e - FH_HISTOGRAM_SUB_BITS + 1) * FH_HISTOGRAM_SUBS + m;
    return index < FH_HISTOGRAM_BUCKETS ? index : FH_HISTOGRAM_BUCKETS - 1;
}

uint64_t
fh_histogram_bucket_low (unsigned bucket)
{
    if (bucket < FH_HISTOGRAM_SUBS)
        return bucket;
    unsigned e = bucket / FH_HISTOGRAM_SUBS + FH_HISTOGRAM_SUB_BITS - 1;
    uint64_t m = bucket % FH_HISTOGRAM_SUBS;
    return (UINT64_C (1) << e) + (m << (e - FH_HISTOGRAM_SUB_BITS));
}

uint64_t
fh_histogram_bucket_high (unsigned bucket)
{
    if (bucket + 1 >= FH_HISTOGRAM_BUCKETS)
        return UINT64_MAX;
    return fh_histogram_bucket_low (bucket + 1);
}

void
fh_histogram_init (fh_histogram_t *self)
{
    for (unsigned i = 0; i < FH_HISTOGRAM_BUCKETS; i++)
        atomic_init (&self->buckets[i], 0);
    atomic_init (&self->count, 0);
    atomic_init (&self->sum_ns, 0);
    atomic_init (&self->max_ns, 0);
}

void
fh_histogram_record (fh_histogram_t *self, int64_t value_ns)
{
    uint64_t v = value_ns > 0 ? (uint64_t) value_ns : 0;
    atomic_uint_fast64_t *bucket = &self->buckets[fh_histogram_bucket (v)];
    s_store (bucket, s_load (bucket) + 1);
    s_store (&self->sum_ns, s_load (&self->sum_ns) + v);
    if (v > s_load (&self->max_ns))
        s_store (&self->max_ns, v);
    /* count last, with release: a reader that sees a count sees its bucket */
    atomic_store_explicit (&self->count, s_load (&self->count) + 1, memory_order_release);
}

void
fh_histogram_read (fh_histogram_t *self, fh_histogram_snapshot_t *out)
{
    /* Count first: the buckets read after it hold at least that many. The
       writer may add more while we read; we keep the count consistent with
       the buckets by summing them. */
    (void) atomic_load_explicit (&self->count, memory_order_acquire);
    uint64_t total = 0;
    for (unsigned i = 0; i < FH_HISTOGRAM_BUCKETS; i++) {
        out->buckets[i] = s_load (&self->buckets[i]);
        total += out->buckets[i];
    }
    out->count = total;
    out->sum_ns = s_load (&self->sum_ns);
    out->max_ns = s_load (&self->max_ns);
}

void
fh_histogram_diff (const fh_histogram_snapshot_t *later, const fh_histogram_snapshot_t *earlier,
                   fh_histogram_snapshot_t *out)
{
    unsigned top = 0;
    bool any = false;
    for (unsigned i = 0; i < FH_HISTOGRAM_BUCKETS; i++) {
        uint64_t a = later->buckets[i], b = earlier->buckets[i];
        out->buckets[i] = a > b ? a - b : 0;
        if (out->buckets[i]) {
            top = i;
            any = true;
        }
    }
    out->count = later->count > earlier->count ? later->count - earlier->count : 0;
    out->sum_ns = later->sum_ns > earlier->sum_ns ? later->sum_ns - earlier->sum_ns : 0;
    uint64_t high = fh_histogram_bucket_high (top);
    out->max_ns = !any ? 0 : (later->max_ns < high ? later->max_ns : high - 1);
}

/* A bucket's representative value: its midpoint (exact below 16 ns). */
static double
s_midpoint (unsigned bucket)
{
    if (bucket < FH_HISTOGRAM_SUBS)
        return (double) bucket;
    double low = (double) fh_histogram_bucket_low (bucket);
    double high = (double) fh_histogram_bucket_high (bucket);
    return (low + high - 1) / 2;
}

/* The value below which a fraction q (0..1) of samples fall, in ns. */
static double
s_quantile (const fh_histogram_snapshot_t *self, double q)
{
    if (self->count == 0)
        return 0;
    if (q < 0)
        q = 0;
    if (q > 1)
        q = 1;
    /* The rank of the sample at quantile q, 1-based, nearest-rank method. */
    uint64_t rank = (uint64_t) (q * (double) self->count + 0.999999999);
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < FH_HISTOGRAM_BUCKETS; i++) {
        seen += self->buckets[i];
        if (seen >= rank) {
            double mid = s_midpoint (i);
            /* Never report more than the largest value seen. */
            return self->max_ns && mid > (double) self->max_ns ? (double) self->max_ns : mid;
        }
    }
    return (double) self->max_ns;
}

void
fh_histogram_summarize (const fh_histogram_snapshot_t *self, fh_histogram_summary_t *out)
{
    memset (out, 0, sizeof *out);
    out->count = self->count;
    if (self->count == 0)
        return;
    out->sum = (double) self->sum_ns / 1e9;
    out->mean = out->sum / (double) self->count;
    out->p50 = s_quantile (self, 0.50) / 1e9;
    out->p90 = s_quantile (self, 0.90) / 1e9;
    out->p99 = s_quantile (self, 0.99) / 1e9;
    out->p999 = s_quantile (self, 0.999) / 1e9;
    out->max = (double) self->max_ns / 1e9;
}

void
fh_histogram_add (fh_histogram_snapshot_t *sum, const fh_histogram_snapshot_t *part)
{
    for (unsigned b = 0; b < FH_HISTOGRAM_BUCKETS; b++)
        sum->buckets[b] += part->buckets[b];
    sum->count += part->count;
    sum->sum_ns += part->sum_ns;
    if (part->max_ns > sum->max_ns)
        sum->max_ns = part->max_ns;
}
