/*  metrics - the registry of the hub's metrics and the snapshot of their
    values. See metrics.h; docs/metrics.md describes every row. */
#include "metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define C FH_METRIC_COUNTER
#define G FH_METRIC_GAUGE
#define H FH_METRIC_HISTOGRAM
#define F FH_METRIC_FIELD
#define I FH_METRIC_INFO
/* How a consumer's figure sums (fh_metric_sum_t). */
#define T FH_SUM_TOTAL
#define X FH_SUM_MAX
#define N FH_SUM_NOW
#define W FH_SUM_NEWEST

/* A row of its own ("of" is itself) and a histogram's max. */
#define ROW(id, scope, json, prom, collectd, type, real, unit, help)                               \
    [id] = {id, scope, json, prom, collectd, type, real, unit, id, help, FH_SUM_NONE, 0}
#define MAX_OF(id, of, scope, json, prom, collectd, help)                                          \
    [id] = {id, scope, json, prom, collectd, G, true, "seconds", of, help, FH_SUM_NONE, 0}
/* A consumer's figure read from field of fh_consumer_counts_t, summed as
   sum says: the snapshot, the workers' and the instances' sums walk these. */
#define COUNTS(id, field, sum, json, prom, collectd, type, unit, help)                             \
    [id] = {id,       FH_SCOPE_CONSUMER,                                                           \
            json,     prom,                                                                        \
            collectd, type,                                                                        \
            false,    unit,                                                                        \
            id,       help,                                                                        \
            sum,      offsetof (fh_consumer_counts_t, field)}

/* In the order of the Prometheus text and of the JSON objects. */
const fh_metric_t fh_metrics[FH_METRIC_COUNT] = {
#include "metrics_rows.h"
};

void
fh_metrics_counts_add (fh_consumer_counts_t *out, const fh_consumer_counts_t *in, bool live)
{
    for (size_t id = 0; id < FH_METRIC_COUNT; id++) {
        fh_metric_sum_t sum = fh_metrics[id].sum;
        if (sum == FH_SUM_NONE || (!live && (sum == FH_SUM_NOW || sum == FH_SUM_NEWEST)))
            continue;
        uint64_t *to = fh_metrics_counts_field (out, (fh_metric_id_t) id);
        uint64_t value = fh_metrics_counts_value (in, (fh_metric_id_t) id);
        if (sum == FH_SUM_TOTAL || sum == FH_SUM_NOW)
            *to += value;
        else if (sum == FH_SUM_NEWEST || value > *to)
            *to = value;
    }
}

/* The upper bound of bucket index, in seconds. */
static double
s_bucket_le (size_t index)
{
    return ldexp (1e-9, (int) (index + FH_METRICS_BUCKET_FIRST_LOG2));
}

void
fh_metrics_bucket_text (size_t index, char *text, size_t size)
{
    snprintf (text, size, "%.9g", s_bucket_le (index));
    for (char *c = text; *c; c++)
        if (*c == ',')
            *c = '.'; /* a locale's decimal comma */
}

int64_t
fh_metric_value_int (const fh_metric_value_t *value)
{
    if (!value->is_real)
        return value->integer;
    if (value->real >= -9.2e18 && value->real <= 9.2e18)
        return (int64_t) value->real;
    return 0;
}

double
fh_metric_value_real (const fh_metric_value_t *value)
{
    return value->is_real ? value->real : (double) value->integer;
}

fh_metrics_snapshot_t *
fh_metrics_snapshot_new (void)
{
    return calloc (1, sizeof (fh_metrics_snapshot_t));
}

static void
s_item_free (fh_metrics_item_t *item)
{
    free (item->name);
    free (item->text);
    free (item->error);
    free (item->version);
    free (item->publish);
    free (item->bound);
    free (item->busy);
    for (size_t i = 0; i < item->own_count; i++) {
        free (item->own[i].name);
        free (item->own[i].family);
        free (item->own[i].help);
    }
    free (item->own);
}

void
fh_metrics_snapshot_destroy (fh_metrics_snapshot_t **self_p)
{
    fh_metrics_snapshot_t *self = *self_p;
    if (!self)
        return;
    s_item_free (&self->hub);
    for (size_t i = 0; i < self->reason_count; i++)
        free (self->reasons[i].name);
    free (self->reasons);
    for (size_t i = 0; i < self->endpoint_count; i++)
        s_item_free (&self->endpoints[i]);
    free (self->endpoints);
    for (size_t i = 0; i < self->consumer_count; i++)
        s_item_free (&self->consumers[i]);
    free (self->consumers);
    free (self);
    *self_p = NULL;
}

/* Grows an array of items by count zeroed ones; the first new one, or NULL. */
static fh_metrics_item_t *
s_add_items (fh_metrics_item_t **items, size_t *used, size_t count)
{
    if (count > SIZE_MAX / sizeof **items - *used)
        return NULL;
    fh_metrics_item_t *grown = realloc (*items, (*used + count) * sizeof **items);
    if (!grown)
        return NULL;
    *items = grown;
    memset (grown + *used, 0, count * sizeof *grown);
    fh_metrics_item_t *first = grown + *used;
    *used += count;
    return first;
}

fh_metrics_item_t *
fh_metrics_add_endpoints (fh_metrics_snapshot_t *self, size_t count)
{
    return s_add_items (&self->endpoints, &self->endpoint_count, count);
}

fh_metrics_item_t *
fh_metrics_add_consumers (fh_metrics_snapshot_t *self, size_t count)
{
    return s_add_items (&self->consumers, &self->consumer_count, count);
}

int
fh_metrics_set_text (char **slot, const char *text)
{
    char *copy = text ? strdup (text) : NULL;
    if (text && !copy)
        return -1;
    free (*slot);
    *slot = copy;
    return 0;
}

int
fh_metrics_add_own (fh_metrics_item_t *item, const char *name, const char *family, const char *help,
                    bool gauge, int64_t value)
{
    fh_metrics_own_t *grown = realloc (item->own, (item->own_count + 1) * sizeof *grown);
    if (!grown)
        return -1;
    item->own = grown;
    fh_metrics_own_t own
        = {strdup (name), family ? strdup (family) : NULL, strdup (help ? help : ""), gauge, value};
    if (!own.name || (family && !own.family) || !own.help) {
        free (own.name);
        free (own.family);
        free (own.help);
        return -1;
    }
    item->own[item->own_count++] = own;
    return 0;
}

int
fh_metrics_add_reason (fh_metrics_snapshot_t *self, const char *name, fh_metric_value_t value)
{
    fh_metrics_reason_t *grown = realloc (self->reasons, (self->reason_count + 1) * sizeof *grown);
    if (!grown)
        return -1;
    self->reasons = grown;
    char *copy = strdup (name);
    if (!copy)
        return -1;
    grown[self->reason_count++] = (fh_metrics_reason_t){copy, value};
    return 0;
}

void
fh_metrics_set_int (fh_metrics_item_t *item, fh_metric_id_t id, int64_t value)
{
    if (fh_metrics[id].real)
        item->values[id] = (fh_metric_value_t){.is_real = true, .real = (double) value};
    else
        item->values[id] = (fh_metric_value_t){.integer = value};
}

void
fh_metrics_set_real (fh_metrics_item_t *item, fh_metric_id_t id, double value)
{
    item->values[id] = (fh_metric_value_t){.is_real = true, .real = value};
}

fh_metrics_latency_t *
fh_metrics_latency (fh_metrics_item_t *item, fh_metric_id_t id)
{
    return &item->latency[id == FH_M_PROCESSING ? 1 : 0];
}

void
fh_metrics_latency_set (fh_metrics_latency_t *latency, const fh_histogram_snapshot_t *run,
                        const fh_histogram_snapshot_t *interval)
{
    fh_histogram_summarize (run, &latency->run);
    if (interval)
        fh_histogram_summarize (interval, &latency->interval);
    else
        memset (&latency->interval, 0, sizeof latency->interval);
    /* Cumulative: every bucket that ends at or below the bound. */
    uint64_t seen = 0;
    unsigned bucket = 0;
    for (size_t i = 0; i < FH_METRICS_BUCKETS; i++) {
        unsigned end = fh_histogram_bucket (UINT64_C (1) << (i + FH_METRICS_BUCKET_FIRST_LOG2));
        for (; bucket < end; bucket++)
            seen += run->buckets[bucket];
        latency->le[i] = seen;
    }
}
