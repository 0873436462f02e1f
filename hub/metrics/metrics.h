/*  metrics - the one registry of the hub's metrics, and the snapshot of
    their values that every output is made from.

    fh_metrics[] is a table with one row per figure (metrics_rows.h, which
    makes the ids too): where it sits in the JSON snapshot (scope and
    key), its Prometheus family, its collectd type, its type, unit and
    help text; a consumer's figure also the offset of its field in
    fh_consumer_counts_t and how it sums, as HAProxy's stat columns carry
    theirs, so that the snapshot and the sums over workers and instances
    read every such figure by its row. The JSON of the control socket
    (metrics_json.c), the Prometheus text, the collectd lines
    (stats_format.c) and the terminal's table (stats_table.c) all walk
    this table over one fh_metrics_snapshot_t, a
    plain C structure; docs/metrics.md is checked against the table by
    test_metrics_registry.

    A snapshot is made on the control thread from the hub's counters
    (stats.c), or read back from a JSON snapshot by a client
    (fh_metrics_from_json, for `fanhub stats`); inside the hub no JSON is
    parsed. A snapshot is owned by whoever made it and touched by one
    thread at a time.
*/
#ifndef FH_METRICS_H_INCLUDED
#define FH_METRICS_H_INCLUDED

#include "consumer_counts.h"
#include "histogram.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    FH_METRIC_COUNTER,   /* since start, never goes down */
    FH_METRIC_GAUGE,     /* the value at the snapshot */
    FH_METRIC_HISTOGRAM, /* a latency: summary in JSON, histogram in Prometheus */
    FH_METRIC_INFO,      /* always 1; its labels carry text */
    FH_METRIC_FIELD      /* a JSON field that is not a figure (a name, a pid) */
} fh_metric_type_t;

/* Where a row's value sits in the JSON snapshot. */
typedef enum {
    FH_SCOPE_HUB,        /* hub.KEY */
    FH_SCOPE_UPSTREAM,   /* hub.upstream.KEY, only with bus.gap_detection */
    FH_SCOPE_AMQP,       /* hub.amqp.KEY, only with bus.amqp */
    FH_SCOPE_SIGNATURES, /* hub.signatures.KEY, only with bus.validate_signatures */
    FH_SCOPE_ENDPOINT,   /* hub.endpoints[].KEY */
    FH_SCOPE_CONSUMER,   /* consumers[].KEY */
    FH_SCOPE_PROCESS     /* process.KEY */
} fh_metric_scope_t;

/* How a consumer's figure (a row with a field of fh_consumer_counts_t)
   sums over a consumer's workers and tallies, and over a lineage's
   instances (fh_metrics_counts_add). */
typedef enum {
    FH_SUM_NONE,  /* not a field of the counts */
    FH_SUM_TOTAL, /* a counter: added, the instances gone included */
    FH_SUM_MAX,   /* a high-water mark: the highest */
    FH_SUM_NOW,   /* a gauge: added over the instances that run now */
    FH_SUM_NEWEST /* a setting or a state: the newest instance's */
} fh_metric_sum_t;

/* The ids of the rows of metrics_rows.h, in its order. */
typedef enum {
#define ROW(id, ...) id
#define MAX_OF(id, ...) id
#define COUNTS(id, ...) id
#include "metrics_rows.h"
#undef ROW
#undef MAX_OF
#undef COUNTS
    FH_METRIC_COUNT
} fh_metric_id_t;

typedef struct {
    fh_metric_id_t id; /* the row's own index, checked by the tests */
    fh_metric_scope_t scope;
    const char *json;       /* key in the scope's JSON object */
    const char *prometheus; /* family name; NULL: JSON only */
    const char *collectd;   /* TYPE[-TYPE_INSTANCE] from collectd's types.db; a
                               histogram's gets _p99 and _mean appended;
                               NULL: none */
    fh_metric_type_t type;
    bool real;         /* the value is a real number, not an integer */
    const char *unit;  /* "messages", "seconds", ...; "" when none */
    fh_metric_id_t of; /* a histogram's max: the histogram; else the row itself */
    const char *help;  /* one line: Prometheus' HELP */
    /* A consumer's figure: how it sums, and the offset of its field in
       fh_consumer_counts_t (FH_SUM_NONE: set by stats.c by hand). */
    fh_metric_sum_t sum;
    size_t counts_at;
} fh_metric_t;

extern const fh_metric_t fh_metrics[FH_METRIC_COUNT];

/* The field of row id in counts (a row whose sum is not FH_SUM_NONE),
   and its value read atomically (a tally being counted may be read). */
static inline uint64_t *
fh_metrics_counts_field (fh_consumer_counts_t *counts, fh_metric_id_t id)
{
    return (uint64_t *) ((char *) counts + fh_metrics[id].counts_at);
}

static inline uint64_t
fh_metrics_counts_value (const fh_consumer_counts_t *counts, fh_metric_id_t id)
{
    return fh_count_read ((const uint64_t *) ((const char *) counts + fh_metrics[id].counts_at));
}

/* Adds in (another worker's tally, another instance's counts) to out, row
   by row: FH_SUM_TOTAL added and FH_SUM_MAX the higher always; with live
   (an instance that runs now, not the figures of one gone) FH_SUM_NOW
   added and FH_SUM_NEWEST taken from in. */
void fh_metrics_counts_add (fh_consumer_counts_t *out, const fh_consumer_counts_t *in, bool live);

/* The upper bounds of the Prometheus histograms' buckets (le): powers of
   two nanoseconds, 2^8 ns to 2^35 ns (256 ns to 34 s), each a bound of the
   hub's log-linear buckets, so the counts are exact. A value equal to a
   bound counts in the next bucket (1 ns resolution). +Inf is the count. */
#define FH_METRICS_BUCKETS 28
#define FH_METRICS_BUCKET_FIRST_LOG2 8
/* The bound as written in the le label and the JSON "buckets" keys. */
void fh_metrics_bucket_text (size_t index, char *text, size_t size);

/* One value: an integer or a real, as the row (or a JSON reader) has it. */
typedef struct {
    bool is_real;
    int64_t integer;
    double real;
} fh_metric_value_t;

/* The value as an integer (a real truncated; out of range or NaN: 0). */
int64_t fh_metric_value_int (const fh_metric_value_t *value);
/* The value as a real number. */
double fh_metric_value_real (const fh_metric_value_t *value);

typedef struct {
    fh_histogram_summary_t run;      /* since start */
    fh_histogram_summary_t interval; /* the last metrics interval */
    uint64_t le[FH_METRICS_BUCKETS]; /* cumulative counts at fh_metrics_bucket_text */
} fh_metrics_latency_t;

/* One figure a consumer's plugin registered of its own (ABI 1.6). */
typedef struct {
    char *name;   /* its name: the JSON key, collectd's plugin_NAME */
    char *family; /* its Prometheus family; NULL: none (read back without) */
    char *help;
    bool gauge; /* else a counter */
    int64_t value;
} fh_metrics_own_t;

/* The hub, an endpoint or a consumer. Text is NULL when absent. */
typedef struct {
    char *name;    /* hub: its name; endpoint: the address; consumer: its name */
    char *text;    /* hub: the version; endpoint: the kind; consumer: the plugin */
    char *error;   /* endpoint: its last error; consumer: the last error its plugin
                    reported (ABI 1.3); NULL: none */
    char *version; /* consumer: its plugin's version; NULL for the others */
    char *publish; /* consumer: its publish: endpoints as opened, one space
                      between them (publish.h); NULL: none */
    char *bound;   /* endpoint: a tcp bind endpoint as bound, a port '*' as
                      chosen; NULL for the others */
    fh_metric_value_t values[FH_METRIC_COUNT]; /* by row, for the rows of its scopes */
    fh_metrics_latency_t latency[2];           /* hub: end_to_end; consumer:
                                                  queue_wait, processing */
    double *busy;                              /* consumer: per worker, 0..1 */
    size_t workers;
    fh_metrics_own_t *own; /* consumer: its plugin's own figures (ABI 1.6) */
    size_t own_count;
} fh_metrics_item_t;

typedef struct {
    char *name;
    fh_metric_value_t value;
} fh_metrics_reason_t;

typedef struct {
    fh_metrics_item_t hub;        /* hub, upstream, amqp and process rows */
    fh_metrics_reason_t *reasons; /* malformed, by reason */
    size_t reason_count;
    bool has_handled, has_end_to_end, has_upstream, has_process;
    bool has_amqp;       /* bus.amqp: the hub.amqp rows */
    bool has_signatures; /* bus.validate_signatures: the hub.signatures rows */
    bool has_crl;        /* and a CRL with a nextUpdate: crl_expires_seconds */
    fh_metrics_item_t *endpoints;
    size_t endpoint_count;
    fh_metrics_item_t *consumers; /* only those with a non-empty name */
    size_t consumer_count;
} fh_metrics_snapshot_t;

/* An empty snapshot (zeros, no endpoint, no consumer); NULL when out of memory. */
fh_metrics_snapshot_t *fh_metrics_snapshot_new (void);
void fh_metrics_snapshot_destroy (fh_metrics_snapshot_t **self_p);
/* Room for count more endpoints or consumers, zeroed; returns the first,
   or NULL when out of memory. */
fh_metrics_item_t *fh_metrics_add_endpoints (fh_metrics_snapshot_t *self, size_t count);
fh_metrics_item_t *fh_metrics_add_consumers (fh_metrics_snapshot_t *self, size_t count);
/* Adds a reason; the name is copied. -1 when out of memory. */
int fh_metrics_add_reason (fh_metrics_snapshot_t *self, const char *name, fh_metric_value_t value);
/* Adds a plugin's own figure to a consumer; the texts are copied (family
   may be NULL). -1 when out of memory. */
int fh_metrics_add_own (fh_metrics_item_t *item, const char *name, const char *family,
                        const char *help, bool gauge, int64_t value);
/* Copies text into *slot (freeing what was there); -1 when out of memory. */
int fh_metrics_set_text (char **slot, const char *text);

/* Setters that follow the row: an integer row gets an integer. */
void fh_metrics_set_int (fh_metrics_item_t *item, fh_metric_id_t id, int64_t value);
void fh_metrics_set_real (fh_metrics_item_t *item, fh_metric_id_t id, double value);
/* The latency of a histogram row (end_to_end, queue_wait, processing). */
fh_metrics_latency_t *fh_metrics_latency (fh_metrics_item_t *item, fh_metric_id_t id);
/* Fills a latency from whole-run and interval histograms (interval may be NULL). */
void fh_metrics_latency_set (fh_metrics_latency_t *latency, const fh_histogram_snapshot_t *run,
                             const fh_histogram_snapshot_t *interval);

/* text as a JSON string ("" for NULL), never refused: text that is not
   UTF-8 (a character cut by someone's buffer, bytes of another encoding)
   gets U+FFFD for each byte that does not start a whole character. Every
   text of an answer (STATS, STATUS) goes through it, so one bad string
   never loses the answer. NULL only when out of memory. */
json_t *fh_metrics_json_text (const char *text);
/* The JSON snapshot of docs/stats-schema.md; NULL when out of memory. */
json_t *fh_metrics_to_json (const fh_metrics_snapshot_t *self);
/* A JSON snapshot read back, for clients (`fanhub stats`). Not trusted: a
   missing field or one of the wrong type counts as 0 (text as absent), a
   consumer without a non-empty string name is left out, and anything
   that is not an object gives an empty snapshot. NULL only when out of
   memory. */
fh_metrics_snapshot_t *fh_metrics_from_json (const json_t *json);
/* 0 when json has the shape of a STATS snapshot: an object whose "hub"
   is an object and whose "consumers" is a list of objects, each with a
   "name"; each figure they hold a number (a latency, an object). Else -1
   with what and where in err ("consumers[0].backlog: expected a
   number"). fh_metrics_from_json takes any JSON (what is missing is 0);
   this is for a snapshot a user hands over. */
int fh_metrics_json_check (const json_t *json, char *err, size_t errlen);

#endif
