/*  metrics_json - a metrics snapshot as the JSON of docs/stats-schema.md,
    and back. See metrics.h.

    Both directions walk the registry (fh_metrics[]) for the figures of
    each scope; only the fields that are text (names, the version, the
    kind), the latency objects and the lists are written out by hand.
    Running out of memory anywhere gives NULL.
*/
#include "metrics.h"

#include "fanhub/sdk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Snapshot to JSON ---------------------------------------------------- */

/* A refused string used to drop every consumer from STATS. */
json_t *
fh_metrics_json_text (const char *text)
{
    size_t len = text ? strlen (text) : 0;
    if (!text || fanhub_utf8_valid (text, len))
        return json_stringn (text ? text : "", len);
    char *copy = malloc (len * 3 + 1); /* at worst each byte becomes three */
    if (!copy)
        return NULL;
    size_t out = 0;
    for (size_t i = 0; i < len;) {
        uint8_t c = (uint8_t) text[i];
        size_t need = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (need <= len - i && fanhub_utf8_valid (text + i, need)) {
            memcpy (copy + out, text + i, need);
            out += need;
            i += need;
        }
        else {
            memcpy (copy + out, "\xEF\xBF\xBD", 3);
            out += 3;
            i++;
        }
    }
    json_t *json = json_stringn (copy, out);
    free (copy);
    return json;
}

/* A row whose value is a plain number of its scope's object; the others
   (text, the reasons, the workers, a histogram's max) are written by hand
   or inside their histogram. */
static bool
s_is_number (const fh_metric_t *row)
{
    if (row->of != row->id || row->type == FH_METRIC_INFO || row->type == FH_METRIC_HISTOGRAM)
        return false;
    if (row->id == FH_M_PID || row->id == FH_M_INTERVAL)
        return true;
    return row->type != FH_METRIC_FIELD && row->id != FH_M_MALFORMED_BY_REASON
           && row->id != FH_M_WORKERS;
}

static json_t *
s_value_json (const fh_metric_value_t *value)
{
    return value->is_real ? json_real (value->real) : json_integer (value->integer);
}

static json_t *
s_summary_json (const fh_histogram_summary_t *s)
{
    return json_pack ("{s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "count", (json_int_t) s->count,
                      "sum", s->sum, "mean", s->mean, "p50", s->p50, "p90", s->p90, "p99", s->p99,
                      "p999", s->p999, "max", s->max);
}

/* The whole-run summary, the interval's and the cumulative Prometheus
   buckets. */
static json_t *
s_latency_json (const fh_metrics_latency_t *latency)
{
    json_t *json = s_summary_json (&latency->run);
    json_t *buckets = json_object ();
    if (!json || !buckets) {
        json_decref (json);
        json_decref (buckets);
        return NULL;
    }
    json_object_set_new (json, "interval", s_summary_json (&latency->interval));
    for (size_t i = 0; i < FH_METRICS_BUCKETS; i++) {
        char le[32];
        fh_metrics_bucket_text (i, le, sizeof le);
        json_object_set_new (buckets, le, json_integer ((json_int_t) latency->le[i]));
    }
    json_object_set_new (json, "buckets", buckets);
    return json;
}

/* The registry's rows of one scope into object: figures and latencies;
   text fields are the caller's. */
static void
s_scope_json (json_t *object, fh_metric_scope_t scope, const fh_metrics_item_t *item)
{
    for (size_t id = 0; id < FH_METRIC_COUNT; id++) {
        const fh_metric_t *row = &fh_metrics[id];
        if (row->scope != scope)
            continue;
        if (row->type == FH_METRIC_HISTOGRAM)
            json_object_set_new (
                object, row->json,
                s_latency_json (fh_metrics_latency ((fh_metrics_item_t *) item, row->id)));
        else if (s_is_number (row))
            json_object_set_new (object, row->json, s_value_json (&item->values[id]));
    }
}

static json_t *
s_hub_json (const fh_metrics_snapshot_t *self)
{
    const fh_metrics_item_t *hub = &self->hub;
    json_t *json = json_object ();
    json_t *reasons = json_object ();
    json_t *endpoints = json_array ();
    if (!json || !reasons || !endpoints) {
        json_decref (json);
        json_decref (reasons);
        json_decref (endpoints);
        return NULL;
    }
    json_object_set_new (json, "name", hub->name ? fh_metrics_json_text (hub->name) : json_null ());
    json_object_set_new (json, "version", fh_metrics_json_text (hub->text));
    s_scope_json (json, FH_SCOPE_HUB, hub);
    for (size_t i = 0; i < self->reason_count; i++)
        json_object_set_new (reasons, self->reasons[i].name,
                             s_value_json (&self->reasons[i].value));
    json_object_set_new (json, "malformed_by_reason", reasons);
    if (!self->has_handled)
        json_object_del (json, "handled");
    if (!self->has_end_to_end)
        json_object_del (json, "end_to_end");
    if (self->has_upstream) {
        json_t *upstream = json_object ();
        s_scope_json (upstream, FH_SCOPE_UPSTREAM, hub);
        json_object_set_new (json, "upstream", upstream);
    }
    if (self->has_amqp) {
        json_t *amqp = json_object ();
        s_scope_json (amqp, FH_SCOPE_AMQP, hub);
        json_object_set_new (json, "amqp", amqp);
    }
    if (self->has_signatures) {
        json_t *signatures = json_object ();
        s_scope_json (signatures, FH_SCOPE_SIGNATURES, hub);
        if (!self->has_crl)
            json_object_del (signatures, "crl_expires_seconds");
        json_object_set_new (json, "signatures", signatures);
    }
    for (size_t i = 0; i < self->endpoint_count; i++) {
        const fh_metrics_item_t *item = &self->endpoints[i];
        json_t *endpoint
            = json_pack ("{s:o, s:o, s:b, s:I}", "endpoint", fh_metrics_json_text (item->name),
                         "kind", fh_metrics_json_text (item->text), "connected",
                         fh_metric_value_int (&item->values[FH_M_ENDPOINT_CONNECTED]) != 0, "peers",
                         (json_int_t) fh_metric_value_int (&item->values[FH_M_ENDPOINT_PEERS]));
        if (endpoint) {
            json_object_set_new (endpoint, "since",
                                 s_value_json (&item->values[FH_M_ENDPOINT_SINCE]));
            json_object_set_new (endpoint, "last_error",
                                 item->error ? fh_metrics_json_text (item->error) : json_null ());
            json_object_set_new (endpoint, "handshake_failures",
                                 s_value_json (&item->values[FH_M_ENDPOINT_HANDSHAKE_FAILURES]));
            if (item->bound)
                json_object_set_new (endpoint, "bound", fh_metrics_json_text (item->bound));
        }
        json_array_append_new (endpoints, endpoint);
    }
    json_object_set_new (json, "endpoints", endpoints);
    return json;
}

static json_t *
s_consumer_json (const fh_metrics_item_t *item)
{
    json_t *json = json_pack ("{s:o, s:o, s:o, s:o}", "name", fh_metrics_json_text (item->name),
                              "plugin", fh_metrics_json_text (item->text), "plugin_version",
                              fh_metrics_json_text (item->version), "last_error",
                              fh_metrics_json_text (item->error));
    json_t *workers = json_array ();
    if (!json || !workers) {
        json_decref (json);
        json_decref (workers);
        return NULL;
    }
    s_scope_json (json, FH_SCOPE_CONSUMER, item);
    for (size_t i = 0; i < item->workers; i++)
        json_array_append_new (workers, json_pack ("{s:f}", "busy", item->busy[i]));
    json_object_set_new (json, "workers", workers);
    if (item->own_count) {
        /* Its plugin's own figures (ABI 1.6), by name. */
        json_t *own = json_object ();
        for (size_t i = 0; own && i < item->own_count; i++) {
            const fh_metrics_own_t *m = &item->own[i];
            json_object_set_new (
                own, m->name,
                json_pack ("{s:s, s:I, s:o, s:o}", "type", m->gauge ? "gauge" : "counter", "value",
                           (json_int_t) m->value, "help", fh_metrics_json_text (m->help),
                           "prometheus", m->family ? json_string (m->family) : json_null ()));
        }
        json_object_set_new (json, "plugin_metrics", own);
    }
    if (item->publish) {
        /* publish: endpoints as opened, a tcp port '*' as chosen. */
        json_t *endpoints = json_array ();
        for (const char *at = item->publish; endpoints && *at;) {
            size_t len = strcspn (at, " ");
            json_array_append_new (endpoints, json_stringn (at, len));
            at += len + (at[len] == ' ');
        }
        json_object_set_new (json, "publish_endpoints", endpoints);
    }
    return json;
}

json_t *
fh_metrics_to_json (const fh_metrics_snapshot_t *self)
{
    json_t *consumers = json_array ();
    for (size_t i = 0; consumers && i < self->consumer_count; i++)
        if (json_array_append_new (consumers, s_consumer_json (&self->consumers[i])) != 0) {
            json_decref (consumers);
            consumers = NULL;
        }
    json_t *process = NULL;
    if (self->has_process) {
        process = json_object ();
        if (process)
            s_scope_json (process, FH_SCOPE_PROCESS, &self->hub);
    }
    json_t *json = json_pack ("{s:o, s:o*}", "hub", s_hub_json (self), "consumers", consumers);
    if (json && process)
        json_object_set_new (json, "process", process);
    else
        json_decref (process);
    return json;
}

/* ---- JSON to snapshot ---------------------------------------------------- */

/* A member as a value: integers and reals as they are, anything else 0
   of the row's kind. */
static fh_metric_value_t
s_value (const json_t *object, const char *key, bool real)
{
    const json_t *json = json_object_get (object, key);
    if (json_is_integer (json))
        return (fh_metric_value_t){.integer = json_integer_value (json)};
    if (json_is_real (json))
        return (fh_metric_value_t){.is_real = true, .real = json_real_value (json)};
    return (fh_metric_value_t){.is_real = real};
}

static uint64_t
s_count (const json_t *object, const char *key)
{
    fh_metric_value_t value = s_value (object, key, false);
    int64_t count = fh_metric_value_int (&value);
    return count > 0 ? (uint64_t) count : 0;
}

static void
s_summary_read (const json_t *json, fh_histogram_summary_t *s)
{
    s->count = s_count (json, "count");
    s->sum = json_number_value (json_object_get (json, "sum"));
    s->mean = json_number_value (json_object_get (json, "mean"));
    s->p50 = json_number_value (json_object_get (json, "p50"));
    s->p90 = json_number_value (json_object_get (json, "p90"));
    s->p99 = json_number_value (json_object_get (json, "p99"));
    s->p999 = json_number_value (json_object_get (json, "p999"));
    s->max = json_number_value (json_object_get (json, "max"));
}

static void
s_latency_read (const json_t *json, fh_metrics_latency_t *latency)
{
    s_summary_read (json, &latency->run);
    s_summary_read (json_object_get (json, "interval"), &latency->interval);
    const json_t *buckets = json_object_get (json, "buckets");
    for (size_t i = 0; i < FH_METRICS_BUCKETS; i++) {
        char le[32];
        fh_metrics_bucket_text (i, le, sizeof le);
        latency->le[i] = s_count (buckets, le);
    }
}

/* The figures of a scope from object (NULL or not an object: zeros). */
static void
s_scope_read (const json_t *object, fh_metric_scope_t scope, fh_metrics_item_t *item)
{
    for (size_t id = 0; id < FH_METRIC_COUNT; id++) {
        const fh_metric_t *row = &fh_metrics[id];
        if (row->scope != scope)
            continue;
        if (row->type == FH_METRIC_HISTOGRAM)
            s_latency_read (json_object_get (object, row->json),
                            fh_metrics_latency (item, row->id));
        else if (s_is_number (row))
            item->values[id] = s_value (object, row->json, row->real);
    }
}

/* A non-empty string member, or NULL. */
static const char *
s_text (const json_t *object, const char *key)
{
    const char *text = json_string_value (json_object_get (object, key));
    return text && *text ? text : NULL;
}

static int
s_hub_read (fh_metrics_snapshot_t *self, const json_t *hub)
{
    s_scope_read (hub, FH_SCOPE_HUB, &self->hub);
    if (fh_metrics_set_text (&self->hub.name, s_text (hub, "name")) != 0
        || fh_metrics_set_text (&self->hub.text,
                                json_string_value (json_object_get (hub, "version")))
               != 0)
        return -1;
    const json_t *reasons = json_object_get (hub, "malformed_by_reason");
    const char *reason;
    const json_t *count;
    json_object_foreach (
        (json_t *) reasons, reason,
        count) if (fh_metrics_add_reason (self, reason, s_value (reasons, reason, false))
                   != 0) return -1;
    self->has_handled = json_object_get (hub, "handled") != NULL;
    self->has_end_to_end = json_is_object (json_object_get (hub, "end_to_end"));
    const json_t *upstream = json_object_get (hub, "upstream");
    self->has_upstream = json_is_object (upstream);
    s_scope_read (upstream, FH_SCOPE_UPSTREAM, &self->hub);
    const json_t *amqp = json_object_get (hub, "amqp");
    self->has_amqp = json_is_object (amqp);
    s_scope_read (amqp, FH_SCOPE_AMQP, &self->hub);
    const json_t *signatures = json_object_get (hub, "signatures");
    self->has_signatures = json_is_object (signatures);
    self->has_crl = json_object_get (signatures, "crl_expires_seconds") != NULL;
    s_scope_read (signatures, FH_SCOPE_SIGNATURES, &self->hub);
    const json_t *endpoints = json_object_get (hub, "endpoints");
    for (size_t i = 0; i < json_array_size (endpoints); i++) {
        const json_t *endpoint = json_array_get (endpoints, i);
        const char *address = json_string_value (json_object_get (endpoint, "endpoint"));
        if (!address)
            continue;
        fh_metrics_item_t *item = fh_metrics_add_endpoints (self, 1);
        if (!item || fh_metrics_set_text (&item->name, address) != 0
            || fh_metrics_set_text (&item->text, s_text (endpoint, "kind")) != 0
            || fh_metrics_set_text (&item->error, s_text (endpoint, "last_error")) != 0
            || fh_metrics_set_text (&item->bound, s_text (endpoint, "bound")) != 0)
            return -1;
        s_scope_read (endpoint, FH_SCOPE_ENDPOINT, item);
        fh_metrics_set_int (item, FH_M_ENDPOINT_CONNECTED,
                            json_is_true (json_object_get (endpoint, "connected")));
    }
    return 0;
}

static int
s_consumer_read (fh_metrics_snapshot_t *self, const json_t *consumer)
{
    const char *name = s_text (consumer, "name");
    if (!name)
        return 0;
    fh_metrics_item_t *item = fh_metrics_add_consumers (self, 1);
    if (!item || fh_metrics_set_text (&item->name, name) != 0
        || fh_metrics_set_text (&item->text, s_text (consumer, "plugin")) != 0
        || fh_metrics_set_text (&item->error, s_text (consumer, "last_error")) != 0
        || fh_metrics_set_text (&item->version, s_text (consumer, "plugin_version")) != 0)
        return -1;
    s_scope_read (consumer, FH_SCOPE_CONSUMER, item);
    const json_t *publish = json_object_get (consumer, "publish_endpoints");
    for (size_t i = 0; i < json_array_size (publish); i++) {
        const char *endpoint = json_string_value (json_array_get (publish, i));
        size_t used = item->publish ? strlen (item->publish) : 0;
        char *grown = endpoint ? realloc (item->publish, used + strlen (endpoint) + 2) : NULL;
        if (endpoint && !grown)
            return -1;
        if (grown) {
            snprintf (grown + used, strlen (endpoint) + 2, "%s%s", used ? " " : "", endpoint);
            item->publish = grown;
        }
    }
    const char *key;
    const json_t *own;
    json_object_foreach ((json_t *) json_object_get (consumer, "plugin_metrics"), key, own)
    {
        const char *type = json_string_value (json_object_get (own, "type"));
        fh_metric_value_t value = s_value (own, "value", false);
        if (json_is_object (own)
            && fh_metrics_add_own (item, key, s_text (own, "prometheus"), s_text (own, "help"),
                                   type && strcmp (type, "gauge") == 0,
                                   fh_metric_value_int (&value))
                   != 0)
            return -1;
    }
    const json_t *workers = json_object_get (consumer, "workers");
    if (json_array_size (workers) > 0) {
        item->busy = calloc (json_array_size (workers), sizeof *item->busy);
        if (!item->busy)
            return -1;
        item->workers = json_array_size (workers);
        for (size_t i = 0; i < item->workers; i++)
            item->busy[i]
                = json_number_value (json_object_get (json_array_get (workers, i), "busy"));
    }
    return 0;
}

fh_metrics_snapshot_t *
fh_metrics_from_json (const json_t *json)
{
    fh_metrics_snapshot_t *self = fh_metrics_snapshot_new ();
    if (!self)
        return NULL;
    int rc = s_hub_read (self, json_object_get (json, "hub"));
    const json_t *consumers = json_object_get (json, "consumers");
    for (size_t i = 0; rc == 0 && i < json_array_size (consumers); i++)
        rc = s_consumer_read (self, json_array_get (consumers, i));
    const json_t *process = json_object_get (json, "process");
    self->has_process = json_is_object (process);
    s_scope_read (process, FH_SCOPE_PROCESS, &self->hub);
    if (rc != 0)
        fh_metrics_snapshot_destroy (&self);
    return self;
}

/* "KEY: expected ..." into err for the first figure of scope in object
   that is there with another type than its own; false when none is. */
static bool
s_scope_misfit (const json_t *object, fh_metric_scope_t scope, char *err, size_t errlen)
{
    for (size_t id = 0; id < FH_METRIC_COUNT; id++) {
        const fh_metric_t *row = &fh_metrics[id];
        const json_t *value = row->scope == scope ? json_object_get (object, row->json) : NULL;
        const char *expected
            = !value ? NULL
              : row->type == FH_METRIC_HISTOGRAM && !json_is_object (value)
                  ? "an object (a latency)"
              : s_is_number (row) && !json_is_number (value)
                      && !(row->id == FH_M_ENDPOINT_CONNECTED && json_is_boolean (value))
                  ? "a number"
                  : NULL;
        if (expected) {
            snprintf (err, errlen, "%s: expected %s", row->json, expected);
            return true;
        }
    }
    return false;
}

/* The objects of a list member (what: "consumers", "hub.endpoints"),
   each with a text `name_key`, each checked as scope. */
static bool
s_list_misfit (const json_t *list, const char *what, const char *name_key, fh_metric_scope_t scope,
               char *err, size_t errlen)
{
    char misfit[160];
    if (!json_is_array (list)) {
        snprintf (err, errlen, "%s: expected a list", what);
        return true;
    }
    for (size_t i = 0; i < json_array_size (list); i++) {
        const json_t *item = json_array_get (list, i);
        if (!json_is_object (item) || !s_text (item, name_key))
            snprintf (err, errlen, "%s[%zu]: expected an object with a %s", what, i, name_key);
        else if (s_scope_misfit (item, scope, misfit, sizeof misfit))
            snprintf (err, errlen, "%s[%zu].%s", what, i, misfit);
        else
            continue;
        return true;
    }
    return false;
}

int
fh_metrics_json_check (const json_t *json, char *err, size_t errlen)
{
    /* The objects that hold one scope each; all but hub optional. */
    static const struct {
        const char *parent, *key, *what;
        fh_metric_scope_t scope;
    } parts[] = {
        {NULL, "hub", "hub", FH_SCOPE_HUB},
        {"hub", "upstream", "hub.upstream", FH_SCOPE_UPSTREAM},
        {"hub", "amqp", "hub.amqp", FH_SCOPE_AMQP},
        {"hub", "signatures", "hub.signatures", FH_SCOPE_SIGNATURES},
        {NULL, "process", "process", FH_SCOPE_PROCESS},
    };
    if (!json_is_object (json) || !json_is_object (json_object_get (json, "hub"))) {
        snprintf (err, errlen,
                  json_is_object (json) ? "hub: expected an object"
                                        : "expected a JSON object, with hub and consumers");
        return -1;
    }
    char misfit[160];
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        const json_t *parent = parts[i].parent ? json_object_get (json, parts[i].parent) : json;
        const json_t *part = json_object_get (parent, parts[i].key);
        if (!part)
            continue;
        if (!json_is_object (part))
            snprintf (err, errlen, "%s: expected an object", parts[i].what);
        else if (s_scope_misfit (part, parts[i].scope, misfit, sizeof misfit))
            snprintf (err, errlen, "%s.%s", parts[i].what, misfit);
        else
            continue;
        return -1;
    }
    const json_t *endpoints = json_object_get (json_object_get (json, "hub"), "endpoints");
    if ((endpoints
         && s_list_misfit (endpoints, "hub.endpoints", "endpoint", FH_SCOPE_ENDPOINT, err, errlen))
        || s_list_misfit (json_object_get (json, "consumers"), "consumers", "name",
                          FH_SCOPE_CONSUMER, err, errlen))
        return -1;
    return 0;
}
