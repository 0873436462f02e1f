/*  plugin_metrics - a plugin's own figures. See plugin_metrics.h. */
#include "plugin_metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* NULL when name is a good metric name, else why not. */
static const char *
s_bad_name (const char *name)
{
    size_t len = name ? strlen (name) : 0;
    if (len == 0)
        return "a metric needs a name";
    if (len > FH_PLUGIN_METRIC_NAME_MAX)
        return "longer than 40 bytes";
    if (name[0] < 'a' || name[0] > 'z')
        return "it must start with a lowercase letter";
    for (size_t i = 0; i < len; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9')
              || name[i] == '_'))
            return "only a-z, 0-9 and _ are allowed";
    if (len >= 6 && strcmp (name + len - 6, "_total") == 0)
        return "it must not end in _total (the hub adds it to a counter's Prometheus name)";
    return NULL;
}

fanhub_metric_t *
fh_plugin_metric_new (fh_plugin_metrics_t **set_p, const char *plugin, const char *name, int kind,
                      const char *help, char *err, size_t errlen)
{
    const char *why = s_bad_name (name);
    if (!why && kind != FANHUB_METRIC_COUNTER && kind != FANHUB_METRIC_GAUGE)
        why = "kind is neither FANHUB_METRIC_COUNTER nor FANHUB_METRIC_GAUGE";
    if (!why && (!help || !*help || strlen (help) > FH_PLUGIN_METRIC_HELP_MAX))
        why = "help must be one line of 1 to 200 bytes";
    if (!why && strpbrk (help, "\r\n"))
        why = "help must be one line";
    if (why) {
        snprintf (err, errlen, "metric '%s': %s", name ? name : "(null)", why);
        return NULL;
    }
    fh_plugin_metrics_t *set = fh_plugin_metrics_of (set_p);
    if (!set) {
        set = calloc (1, sizeof *set);
        if (!set) {
            snprintf (err, errlen, "metric '%s': out of memory", name);
            return NULL;
        }
        __atomic_store_n (set_p, set, __ATOMIC_RELEASE);
    }
    size_t count = atomic_load (&set->count);
    for (size_t i = 0; i < count; i++)
        if (strcmp (set->items[i].name, name) == 0) {
            snprintf (err, errlen, "metric '%s': registered already for this consumer", name);
            return NULL;
        }
    if (count == FANHUB_METRICS_MAX) {
        snprintf (err, errlen, "metric '%s': a consumer has at most %d metrics", name,
                  FANHUB_METRICS_MAX);
        return NULL;
    }
    fanhub_metric_t *metric = &set->items[count];
    memset (metric, 0, sizeof *metric);
    metric->kind = kind;
    snprintf (metric->name, sizeof metric->name, "%s", name);
    snprintf (metric->help, sizeof metric->help, "%s", help);
    char prefix[33];
    const char *from = plugin && *plugin ? plugin : "plugin";
    size_t len = 0;
    for (; from[len] && len + 1 < sizeof prefix; len++) {
        char c = from[len];
        bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        prefix[len] = c >= 'A' && c <= 'Z' ? (char) (c - 'A' + 'a') : keep ? c : '_';
    }
    prefix[len] = '\0';
    snprintf (metric->family, sizeof metric->family, "fanhub_plugin_%s_%s%s", prefix, name,
              kind == FANHUB_METRIC_COUNTER ? "_total" : "");
    atomic_store_explicit (&set->count, count + 1, memory_order_release);
    return metric;
}

void
fh_plugin_metric_add (fanhub_metric_t *metric, int64_t n)
{
    if (metric && (n >= 0 || metric->kind == FANHUB_METRIC_GAUGE))
        __atomic_fetch_add (&metric->value, n, __ATOMIC_RELAXED);
}

void
fh_plugin_metric_set (fanhub_metric_t *metric, int64_t value)
{
    if (metric && metric->kind == FANHUB_METRIC_GAUGE)
        __atomic_store_n (&metric->value, value, __ATOMIC_RELAXED);
}

fh_plugin_metrics_t *
fh_plugin_metrics_of (fh_plugin_metrics_t *const *set_p)
{
    return __atomic_load_n (set_p, __ATOMIC_ACQUIRE);
}

size_t
fh_plugin_metrics_count (const fh_plugin_metrics_t *set)
{
    return set ? atomic_load_explicit (&set->count, memory_order_acquire) : 0;
}

int64_t
fh_plugin_metric_value (const fanhub_metric_t *metric)
{
    return __atomic_load_n (&metric->value, __ATOMIC_RELAXED);
}

void
fh_plugin_metrics_free (fh_plugin_metrics_t **set_p)
{
    free (*set_p);
    *set_p = NULL;
}
