/*  plugin_metrics - the figures a plugin registers of its own (ABI 1.6,
    host->metric_new, metric_add, metric_set).

    A consumer's set is made by its context on the first registration
    and lives as long as the context (never freed: a plugin's thread may
    count after fini). Registration is from init, on one thread; it
    publishes each metric with a release store of the count, so a
    snapshot (the control thread) reads the set without a lock, and a
    plugin's threads count with relaxed atomic adds.

    Names: 1 to 40 of [a-z0-9_], a letter first, not ending in "_total",
    unique within the consumer. Prometheus' family is
    fanhub_plugin_PLUGIN_NAME (PLUGIN the descriptor's name, anything but
    [a-z0-9_] as '_'), `_total` added to a counter's.
*/
#ifndef FH_PLUGIN_METRICS_H_INCLUDED
#define FH_PLUGIN_METRICS_H_INCLUDED

#include "fanhub/consumer.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FH_PLUGIN_METRIC_NAME_MAX 40
#define FH_PLUGIN_METRIC_HELP_MAX 200

struct fanhub_metric {
    int64_t value; /* atomic builtins */
    int kind;      /* FANHUB_METRIC_COUNTER or FANHUB_METRIC_GAUGE */
    char name[FH_PLUGIN_METRIC_NAME_MAX + 1];
    char family[FH_PLUGIN_METRIC_NAME_MAX + 64];
    char help[FH_PLUGIN_METRIC_HELP_MAX + 1];
};

typedef struct fh_plugin_metrics {
    atomic_size_t count; /* items published */
    fanhub_metric_t items[FANHUB_METRICS_MAX];
} fh_plugin_metrics_t;

/* The set *set_p as it is now (read with acquire: another thread may
   have made it). */
fh_plugin_metrics_t *fh_plugin_metrics_of (fh_plugin_metrics_t *const *set_p);
/* Registers name in *set_p (made when NULL) for the plugin named plugin
   (its descriptor's name; NULL: "plugin"). The metric, or NULL with one
   line in err: a bad name, kind or help, a duplicate, too many, out of
   memory. */
fanhub_metric_t *fh_plugin_metric_new (fh_plugin_metrics_t **set_p, const char *plugin,
                                       const char *name, int kind, const char *help, char *err,
                                       size_t errlen);
/* Frees *set_p and its metrics, NULLs it: for a context that does not
   outlive its plugin (one made on the stack by check or replay), after
   fini. Safe with NULL. */
void fh_plugin_metrics_free (fh_plugin_metrics_t **set_p);
/* host->metric_add and metric_set. NULL metric: nothing. */
void fh_plugin_metric_add (fanhub_metric_t *metric, int64_t n);
void fh_plugin_metric_set (fanhub_metric_t *metric, int64_t value);
/* How many a set holds (0 for NULL), and metric i's value now. */
size_t fh_plugin_metrics_count (const fh_plugin_metrics_t *set);
int64_t fh_plugin_metric_value (const fanhub_metric_t *metric);

#endif
