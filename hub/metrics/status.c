/*  status - the status page's figures. See status.h. */
#include "status.h"

#include "clock.h"
#include "fanhub/consumer.h"
#include "log.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define S_SERIES_MAX 4096 /* consumer names remembered */

typedef struct {
    int64_t t_ns;
    uint64_t backlog, enqueued, dequeued;
} s_sample_t;

typedef struct {
    char *name;
    s_sample_t samples[FH_STATUS_SAMPLES];
    size_t next, count;
    uint64_t serial; /* the consumer's lineage: another one under the name starts afresh */
    int64_t seen_ns; /* the last tick that found the consumer */
} s_series_t;

struct fh_status {
    s_series_t *series;
    size_t count, room;
    int64_t next_ns; /* the next sample; 0: at the first tick */
};

fh_status_t *
fh_status_new (void)
{
    return calloc (1, sizeof (fh_status_t));
}

void
fh_status_destroy (fh_status_t **self_p)
{
    fh_status_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; i < self->count; i++)
        free (self->series[i].name);
    free (self->series);
    free (self);
    *self_p = NULL;
}

/* Appends a series for name. NULL when out of memory or at S_SERIES_MAX
   names. */
static s_series_t *
s_series_add (fh_status_t *self, const char *name)
{
    if (self->count >= S_SERIES_MAX)
        return NULL;
    if (self->count == self->room) {
        size_t room = self->room ? self->room * 2 : 8;
        s_series_t *grown = realloc (self->series, room * sizeof *grown);
        if (!grown)
            return NULL;
        self->series = grown;
        self->room = room;
    }
    s_series_t *series = &self->series[self->count];
    memset (series, 0, sizeof *series);
    series->name = strdup (name);
    if (!series->name)
        return NULL;
    self->count++;
    return series;
}

/* The series of a consumer; made when create (NULL when out of memory
   or too many names, or not found). */
static s_series_t *
s_series (fh_status_t *self, size_t hint, const char *name, bool create)
{
    /* The consumers keep their order between reloads, mostly: looking at
       the hint first keeps a tick of 1,000 consumers from 500,000 strcmp. */
    if (hint < self->count && strcmp (self->series[hint].name, name) == 0)
        return &self->series[hint];
    for (size_t i = 0; i < self->count; i++)
        if (strcmp (self->series[i].name, name) == 0)
            return &self->series[i];
    return create ? s_series_add (self, name) : NULL;
}

static const s_sample_t *
s_sample (const s_series_t *series, size_t age) /* 0: the newest */
{
    return &series->samples[(series->next + FH_STATUS_SAMPLES - 1 - age) % FH_STATUS_SAMPLES];
}

/* The series of consumers that this tick did not find: reloads removed
   them, and their names would otherwise be kept for good. */
static void
s_forget_removed (fh_status_t *self, int64_t now_ns)
{
    size_t kept = 0;
    for (size_t i = 0; i < self->count; i++) {
        if (self->series[i].seen_ns != now_ns) {
            free (self->series[i].name);
            continue;
        }
        if (kept != i)
            self->series[kept] = self->series[i];
        kept++;
    }
    self->count = kept;
}

void
fh_status_tick (fh_status_t *self, fh_hub_t *hub, int64_t now_ns)
{
    if (self->next_ns && now_ns < self->next_ns)
        return;
    self->next_ns = now_ns + FH_STATUS_STEP_NS;
    /* The first step has nothing to find (a config's names are unique):
       searching would compare 500,000 pairs of names for 1,000 consumers. */
    bool first = self->count == 0;
    for (size_t i = 0; i < fh_hub_consumer_count (hub); i++) {
        const char *name = fh_consumer_name (fh_hub_consumer (hub, i));
        s_series_t *series = first ? s_series_add (self, name) : s_series (self, i, name, true);
        if (!series)
            continue;
        fh_consumer_counts_t counts;
        fh_hub_consumer_counts (hub, i, &counts);
        series->seen_ns = now_ns;
        /* Removed and added again by reloads: its predecessor's samples go. */
        uint64_t serial = fh_hub_consumer_serial (hub, i);
        if (series->serial != serial) {
            series->count = series->next = 0;
            series->serial = serial;
        }
        series->samples[series->next]
            = (s_sample_t){now_ns, counts.backlog, counts.enqueued, counts.dequeued};
        series->next = (series->next + 1) % FH_STATUS_SAMPLES;
        if (series->count < FH_STATUS_SAMPLES)
            series->count++;
    }
    s_forget_removed (self, now_ns);
}

static int64_t
s_int (const fh_metrics_item_t *item, fh_metric_id_t id)
{
    return fh_metric_value_int (&item->values[id]);
}

/* The part of a backlog (in messages) on disk as a whole percentage,
   rounded here once so that the page and its script show the same; null
   with no backlog. */
static json_t *
s_on_disk_percent (uint64_t on_disk, uint64_t backlog)
{
    if (backlog == 0)
        return json_null ();
    if (on_disk > backlog) /* read a moment apart */
        on_disk = backlog;
    return json_integer ((json_int_t) ((on_disk * 200 + backlog) / (2 * backlog)));
}

/* A consumer's "status": state, rates over the last step or more, time
   to drain, the backlog history (oldest first, the snapshot's last). */
static json_t *
s_consumer_status (const s_series_t *series, const fh_metrics_item_t *item, int64_t now_ns)
{
    uint64_t backlog = (uint64_t) s_int (item, FH_M_BACKLOG);
    /* The worst first: a plugin that cannot work says more than a queue. */
    int64_t plugin_state = s_int (item, FH_M_PLUGIN_STATE);
    const char *state = plugin_state == FANHUB_STATE_HALTED    ? "halted"
                        : plugin_state == FANHUB_STATE_DOWN    ? "down"
                        : plugin_state == 3 /* fanhub pause */ ? "paused"
                        : s_int (item, FH_M_STUCK) > 0         ? "stuck"
                        : s_int (item, FH_M_SPOOL_BYTES) > 0   ? "spilling"
                                                               : "running";
    bool plugin_says = plugin_state == FANHUB_STATE_HALTED || plugin_state == FANHUB_STATE_DOWN;
    const char *reason = plugin_says && item->error && *item->error ? item->error
                         : plugin_says                              ? "no error given"
                                                                    : "";
    double in = 0, out = 0;
    json_t *history = json_array ();
    uint64_t enqueued = (uint64_t) s_int (item, FH_M_ENQUEUED);
    uint64_t dequeued = (uint64_t) s_int (item, FH_M_DEQUEUED);
    if (series && series->count) {
        /* The rates: from the newest sample a step old or more. */
        size_t age = 0;
        while (age + 1 < series->count && now_ns - s_sample (series, age)->t_ns < FH_STATUS_STEP_NS)
            age++;
        const s_sample_t *then = s_sample (series, age);
        double seconds = (double) (now_ns - then->t_ns) / 1e9;
        if (seconds > 0.5) {
            in = (double) (enqueued - then->enqueued) / seconds;
            out = (double) (dequeued - then->dequeued) / seconds;
        }
        for (size_t i = series->count; i > 0; i--)
            json_array_append_new (history,
                                   json_integer ((json_int_t) s_sample (series, i - 1)->backlog));
    }
    json_array_append_new (history, json_integer ((json_int_t) backlog));
    json_t *share = s_on_disk_percent ((uint64_t) s_int (item, FH_M_SPOOL_MESSAGES), backlog);
    json_t *drain = backlog == 0 ? json_real (0)
                    : out > in   ? json_real ((double) backlog / (out - in))
                                 : json_null ();
    return json_pack ("{s:s, s:o, s:f, s:f, s:o, s:o, s:{s:f, s:o}}", "state", state, "reason",
                      fh_metrics_json_text (reason), "rate_in", in, "rate_out", out,
                      "on_disk_percent", share, "drain_seconds", drain, "history", "step",
                      (double) FH_STATUS_STEP_NS / 1e9, "backlog", history);
}

/* The hub's "status": the time of the answer (Unix), configuration file,
   last reload, recent warnings. */
static json_t *
s_hub_status (fh_hub_t *hub, double now_s)
{
    char reload[512];
    uint64_t attempts = fh_hub_reload_result (hub, reload, sizeof reload);
    fh_log_line_t lines[FH_LOG_RECENT];
    size_t n = fh_log_recent (lines, FH_LOG_RECENT);
    json_t *warnings = json_array ();
    for (size_t i = 0; i < n; i++)
        json_array_append_new (
            warnings, json_pack ("{s:f, s:s, s:o}", "time", (double) lines[i].wall_ns / 1e9,
                                 "level", lines[i].level == FANHUB_LOG_ERROR ? "error" : "warning",
                                 "text", fh_metrics_json_text (lines[i].text)));
    return json_pack ("{s:f, s:o, s:o, s:o, s:o}", "now", now_s, "config_file",
                      fh_metrics_json_text (fh_hub_config (hub)->source), "last_reload",
                      attempts ? fh_metrics_json_text (reload) : json_null (), "last_reload_time",
                      attempts ? json_real (fh_hub_reload_time (hub)) : json_null (),
                      "recent_warnings", warnings);
}

/* The lineage serial of the hub's consumer `name` (at `hint` mostly); 0,
   which none has, when there is none. */
static uint64_t
s_serial_of (fh_hub_t *hub, size_t hint, const char *name)
{
    size_t count = fh_hub_consumer_count (hub);
    if (hint < count && strcmp (fh_consumer_name (fh_hub_consumer (hub, hint)), name) == 0)
        return fh_hub_consumer_serial (hub, hint);
    for (size_t i = 0; i < count; i++)
        if (strcmp (fh_consumer_name (fh_hub_consumer (hub, i)), name) == 0)
            return fh_hub_consumer_serial (hub, i);
    return 0;
}

char *
fh_status_answer (fh_status_t *self, fh_hub_t *hub, const fh_metrics_snapshot_t *snapshot,
                  int64_t now_ns)
{
    json_t *json = fh_metrics_to_json (snapshot);
    if (!json)
        return NULL;
    json_object_set_new (json_object_get (json, "hub"), "status",
                         s_hub_status (hub, (double) (now_ns + fh_clock_wall_offset_ns ()) / 1e9));
    json_t *consumers = json_object_get (json, "consumers");
    for (size_t i = 0; i < snapshot->consumer_count && i < json_array_size (consumers); i++) {
        const fh_metrics_item_t *item = &snapshot->consumers[i];
        s_series_t *series = s_series (self, i, item->name, false);
        /* A consumer added again since the last tick: not its samples. */
        if (series && series->serial != s_serial_of (hub, i, item->name))
            series = NULL;
        json_object_set_new (json_array_get (consumers, i), "status",
                             s_consumer_status (series, item, now_ns));
    }
    char *text = json_dumps (json, JSON_COMPACT);
    json_decref (json);
    return text;
}
