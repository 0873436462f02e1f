/*  histogram - latency histogram with log-spaced buckets, one writer.

    Values are nanoseconds. Bucket boundaries are 2^e * (1 + m/16) for
    m = 0..15, so a bucket is at most 1/16 of its lower bound wide and the
    midpoint reported for a quantile is within 3.2% of any value in it
    (values below 16 ns are exact). 62 binary orders cover 1 ns to about
    146 years in 16 * 60 buckets.

    The owning thread records with fh_histogram_record: plain relaxed
    stores, no lock, no locked instruction. Any thread may take a snapshot
    (fh_histogram_read); snapshots subtract, which is how "over the last
    interval" figures are made from two whole-run snapshots.
*/
#ifndef FH_HISTOGRAM_H_INCLUDED
#define FH_HISTOGRAM_H_INCLUDED

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define FH_HISTOGRAM_SUB_BITS 4
#define FH_HISTOGRAM_SUBS (1 << FH_HISTOGRAM_SUB_BITS)
#define FH_HISTOGRAM_BUCKETS (FH_HISTOGRAM_SUBS * 60)

typedef struct {
    atomic_uint_fast64_t buckets[FH_HISTOGRAM_BUCKETS];
    atomic_uint_fast64_t count;
    atomic_uint_fast64_t sum_ns;
    atomic_uint_fast64_t max_ns;
} fh_histogram_t;

typedef struct {
    uint64_t buckets[FH_HISTOGRAM_BUCKETS];
    uint64_t count;
    uint64_t sum_ns;
    uint64_t max_ns; /* over the whole run: a difference keeps the later one */
} fh_histogram_snapshot_t;

/* Summary figures, in seconds. All zero when count is zero. */
typedef struct {
    uint64_t count;
    double sum, mean, p50, p90, p99, p999, max;
} fh_histogram_summary_t;

void fh_histogram_init (fh_histogram_t *self);
/* Owner thread only. Negative values count as 0. */
void fh_histogram_record (fh_histogram_t *self, int64_t value_ns);
void fh_histogram_read (fh_histogram_t *self, fh_histogram_snapshot_t *out);
/* out = later - earlier, bucket by bucket (out may alias later). The max
   of an interval is not kept by the buckets; it is estimated from the
   highest bucket that changed, bounded by later->max_ns. */
void fh_histogram_diff (const fh_histogram_snapshot_t *later,
                        const fh_histogram_snapshot_t *earlier, fh_histogram_snapshot_t *out);
/* sum += part, bucket by bucket (merging histograms of several writers). */
void fh_histogram_add (fh_histogram_snapshot_t *sum, const fh_histogram_snapshot_t *part);
void fh_histogram_summarize (const fh_histogram_snapshot_t *self, fh_histogram_summary_t *out);

/* Bucket index of a value and the bounds of a bucket (for tests). */
unsigned fh_histogram_bucket (uint64_t value_ns);
uint64_t fh_histogram_bucket_low (unsigned bucket);
uint64_t fh_histogram_bucket_high (unsigned bucket); /* exclusive */

#endif
