/*  health - liveness and readiness. See health.h. */
#include "health.h"

#include "fanhub/consumer.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool
fh_health_enqueuer_live (int64_t age_ns)
{
    return age_ns < FH_HEALTH_STALL_NS;
}

static void s_reason (json_t *reasons, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

static void
s_reason (json_t *reasons, const char *fmt, ...)
{
    char line[512];
    va_list args;
    va_start (args, fmt);
    vsnprintf (line, sizeof line, fmt, args);
    va_end (args);
    json_array_append_new (reasons, json_string (line));
}

static int64_t
s_int (const fh_metrics_item_t *item, fh_metric_id_t id)
{
    return fh_metric_value_int (&item->values[id]);
}

/* The readiness conditions beyond liveness, each failed one a reason. */
static void
s_ready_reasons (const fh_metrics_snapshot_t *snapshot, const fh_config_t *config, json_t *reasons)
{
    for (size_t i = 0; i < snapshot->endpoint_count; i++) {
        const fh_metrics_item_t *e = &snapshot->endpoints[i];
        if (e->text && strcmp (e->text, "connect") == 0 && !s_int (e, FH_M_ENDPOINT_CONNECTED))
            s_reason (reasons, "bus endpoint %s not connected (%s)", e->name ? e->name : "",
                      e->error ? e->error : "no answer yet");
    }
    for (size_t i = 0; i < snapshot->consumer_count; i++) {
        const fh_metrics_item_t *c = &snapshot->consumers[i];
        const char *name = c->name ? c->name : "";
        int64_t state = s_int (c, FH_M_PLUGIN_STATE);
        /* A worker plugin's own word: its processes cannot start (down)
           or it stopped on purpose (halted). */
        if (state == FANHUB_STATE_DOWN || state == FANHUB_STATE_HALTED)
            s_reason (reasons, "consumer '%s' %s: %s", name,
                      state == FANHUB_STATE_DOWN ? "down" : "halted",
                      c->error && *c->error ? c->error : "no error given");
        if (s_int (c, FH_M_STUCK) > 0)
            s_reason (reasons, "consumer '%s' stuck: %lld consume call(s) past consume_timeout",
                      name, (long long) s_int (c, FH_M_STUCK));
        for (size_t k = 0; k < config->consumer_count; k++) {
            const fh_consumer_config_t *cc = &config->consumers[k];
            uint64_t bytes = (uint64_t) s_int (c, FH_M_SPOOL_BYTES);
            /* A spilled message that would pass the cap is dropped, so
               the spool stops short of it: 90 % counts as full. */
            if (strcmp (cc->name, name) == 0 && cc->spool_max_bytes
                && bytes >= cc->spool_max_bytes / 10 * 9)
                s_reason (reasons, "consumer '%s' spool full: %llu of %zu bytes", name,
                          (unsigned long long) bytes, cc->spool_max_bytes);
        }
    }
}

char *
fh_health_answer (const fh_metrics_snapshot_t *snapshot, const fh_config_t *config,
                  int64_t enqueuer_age_ns, bool ready)
{
    json_t *reasons = json_array ();
    json_t *json = json_object ();
    if (!reasons || !json) {
        json_decref (reasons);
        json_decref (json);
        return NULL;
    }
    if (!fh_health_enqueuer_live (enqueuer_age_ns))
        s_reason (reasons, "the enqueuer has not advanced for %.1f s (a full block queue?)",
                  (double) enqueuer_age_ns / 1e9);
    if (ready)
        s_ready_reasons (snapshot, config, reasons);
    bool ok = json_array_size (reasons) == 0;
    json_object_set_new (json, "status", json_string (ok ? "ok" : "fail"));
    json_object_set_new (json, "check", json_string (ready ? "readiness" : "liveness"));
    json_object_set_new (json, "enqueuer_idle_seconds", json_real ((double) enqueuer_age_ns / 1e9));
    json_object_set_new (json, "reasons", reasons);
    char *body = json_dumps (json, JSON_COMPACT);
    json_decref (json);
    if (!body)
        return NULL;
    size_t size = strlen (body) + 5;
    char *answer = malloc (size);
    if (answer)
        snprintf (answer, size, "%s %s", ok ? "200" : "503", body);
    free (body);
    return answer;
}
