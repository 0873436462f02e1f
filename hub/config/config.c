/*  config - the hub's configuration: its schema, loading and freeing.

    The file is loaded by the YAML loader (config_yaml.c: libyaml's
    document API, so anchors and aliases resolve) and then walked section
    by section. Each section is a table of fields: its key, the parser that
    checks and stores the value (config_fields.c), where in the target
    struct the value goes, and its limits. A section parser refuses keys
    that are not in its table (listing the ones that are), duplicate keys
    and missing required keys, and hands each value to the field's parser;
    a hook then checks what involves several fields. Adding a key is adding
    a row to a table here, or for a consumer's key in config_consumer.c
    (and, for a new parser, a comparison in config_reload.c).

    Every error is one line, "FILE:LINE:COL: KEYPATH: message", with the
    1-based line and column of the offending node, and stops the load.
    See config.h; config_internal.h lists the files of the loader.
*/
#include "config.h"

#include "config_internal.h"
#include "control_path.h"

#include <fanhub/sdk_curve.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define S_MAX_FRAMES_MIN 2
#define S_MAX_FRAMES_MAX 1024
#define S_MAX_MESSAGE_BYTES_MAX 2147483648LL /* 1 << 31 */
#define S_SHUTDOWN_TIMEOUT_MAX_S 3600

/* The default endpoint (fh_cfg_default_control), checked. */
static int
s_control_default (fh_yaml_t *ctx, yaml_node_t *root, fh_config_t *cfg)
{
    char *endpoint = fh_cfg_default_control (cfg->name);
    if (!endpoint)
        return fh_yaml_oom (ctx, root->start_mark);
    cfg->control = endpoint;
    const char *why = fh_cfg_control_check (endpoint);
    if (why) {
        size_t mark = fh_yaml_path_key (ctx, "control");
        fh_yaml_error (ctx, root->start_mark,
                       "the default endpoint '%s' is not usable: %s; set control:", endpoint, why);
        fh_yaml_path_pop (ctx, mark);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Checks across keys and the tables                                    */

static int
s_bus_finish (fh_yaml_t *ctx, yaml_node_t *node, void *target)
{
    fh_config_t *cfg = target;
    yaml_node_t *curve = fh_yaml_map_find (ctx, node, "curve");
    if (curve && cfg->connect.count && !cfg->curve.server_public_key) {
        fh_yaml_path_key (ctx, "curve.server_public_key");
        return fh_yaml_error (ctx, curve->start_mark,
                              "missing: with curve, bus.connect needs the "
                              "publishers' public key");
    }
    if (curve && cfg->bind.count + cfg->publish.count && !cfg->curve.allow.count
        && !cfg->curve.allow_dir) {
        fh_yaml_path_key (ctx, "curve.allow");
        return fh_yaml_error (ctx, curve->start_mark,
                              "missing: with curve, bus.bind and "
                              "bus.publish need the clients' keys (allow: or allow_dir:)");
    }
    return 0;
}

/* What bus.curve and control_curve share: allow_dir a directory, and
   each named key pair read (its file checked) at load, so that `check`
   refuses what `run` would. */
typedef struct {
    const char *key, *file;
    char *public_key, *secret_key;
} s_key_pair_t;

static int
s_curve_keys_check (fh_yaml_t *ctx, yaml_node_t *node, const char *allow_dir,
                    const s_key_pair_t *pairs, size_t count)
{
    struct stat st;
    if (allow_dir && (stat (allow_dir, &st) != 0 || !S_ISDIR (st.st_mode)))
        return fh_yaml_key_error (ctx, node, "allow_dir",
                                  "%s is not a directory (of zcert public key files)", allow_dir);
    for (size_t i = 0; i < count; i++) {
        char why[512];
        if (pairs[i].file
            && fanhub_curve_load_secret (pairs[i].file, pairs[i].public_key, pairs[i].secret_key,
                                         why, sizeof why)
                   != 0)
            return fh_yaml_key_error (ctx, node, pairs[i].key, "%s", why);
    }
    return 0;
}

/* bus.curve: this hub's key pair, the allowed clients. */
static int
s_curve_finish (fh_yaml_t *ctx, yaml_node_t *node, void *target)
{
    fh_config_t *cfg = target;
    if (!cfg->curve.secret_key_file) /* absent: the error is at the map */
        return fh_yaml_key_error (ctx, node, "secret_key_file",
                                  "missing required key (CURVE needs this "
                                  "hub's key pair; fanhub keygen writes one)");
    s_key_pair_t pair = {"secret_key_file", cfg->curve.secret_key_file, cfg->curve.public_key,
                         cfg->curve.secret_key};
    return s_curve_keys_check (ctx, node, cfg->curve.allow_dir, &pair, 1);
}

/* control_curve: CURVE on a tcp:// control endpoint, with bus.curve's
   keys and checks; the key files are read at load, so that `check`
   refuses what `run` would, and a client given -c finds the keys. */
static int
s_control_curve_finish (fh_yaml_t *ctx, yaml_node_t *node, void *target)
{
    fh_config_t *cfg = target;
    if (!cfg->control_curve.secret_key_file)
        return fh_yaml_key_error (ctx, node, "secret_key_file",
                                  "missing required key (the control "
                                  "socket's key pair; fanhub keygen writes one)");
    if (!cfg->control_curve.allow.count && !cfg->control_curve.allow_dir
        && !cfg->control_curve.client_key_file) {
        fh_yaml_path_key (ctx, "allow");
        return fh_yaml_error (ctx, node->start_mark,
                              "missing: the clients' keys (allow:, "
                              "allow_dir: or client_key_file:)");
    }
    const s_key_pair_t pairs[] = {
        {"secret_key_file", cfg->control_curve.secret_key_file, cfg->control_curve.public_key,
         cfg->control_curve.secret_key},
        {"client_key_file", cfg->control_curve.client_key_file,
         cfg->control_curve.client_public_key, cfg->control_curve.client_secret_key},
    };
    return s_curve_keys_check (ctx, node, cfg->control_curve.allow_dir, pairs, 2);
}

/* Who may reach the control endpoint: a tcp:// one off loopback needs
   control_curve, or control_insecure; control_curve needs tcp://. */
static int
s_control_exposure_check (fh_yaml_t *ctx, yaml_node_t *root, fh_config_t *cfg)
{
    bool curve = cfg->control_curve.secret_key_file != NULL;
    bool tcp = strncmp (cfg->control, "tcp://", 6) == 0;
    yaml_node_t *at = fh_yaml_map_find (ctx, root, curve && !tcp ? "control_curve" : "control");
    yaml_mark_t mark = at ? at->start_mark : root->start_mark;
    if (curve && !tcp) {
        fh_yaml_path_key (ctx, "control_curve");
        return fh_yaml_error (ctx, mark,
                              "CURVE is for a tcp:// control endpoint, not %s (an "
                              "ipc socket is guarded by its owner and mode)",
                              cfg->control);
    }
    if (tcp && !curve && !cfg->control_insecure && !fh_cfg_control_on_loopback (cfg->control)) {
        fh_yaml_path_key (ctx, "control");
        return fh_yaml_error (ctx, mark,
                              "%s is not on loopback: other hosts could send it "
                              "emit, reload and stats requests; give control_curve: (CURVE "
                              "keys, docs/security.md), or control_insecure: true to serve it "
                              "in clear all the same",
                              cfg->control);
    }
    return 0;
}

/* What depends on several sections: the consumers' checks above, the
   drop-ins (config_include.c), the log level, the control endpoint. */
static int
s_top_finish (fh_yaml_t *ctx, yaml_node_t *node, void *target)
{
    fh_config_t *cfg = target;
    static const fanhub_log_level_t levels[]
        = {FANHUB_LOG_ERROR, FANHUB_LOG_WARNING, FANHUB_LOG_INFO, FANHUB_LOG_DEBUG};
    cfg->log_level = (int) levels[cfg->log_level];
    yaml_node_t *list = fh_yaml_map_find (ctx, node, "consumers");
    yaml_node_t *include = fh_yaml_map_find (ctx, node, "include");
    if (!list && !include) {
        fh_yaml_path_key (ctx, "consumers");
        return fh_yaml_error (ctx, node->start_mark, "required key is missing");
    }
    for (size_t i = 0; i < cfg->consumer_count; i++)
        if (fh_cfg_consumer_cross_check (ctx, cfg, i,
                                         fh_yaml_node (ctx, list->data.sequence.items.start[i]), i))
            return -1;
    if (fh_cfg_include_load (ctx, node, cfg))
        return -1;
    bool fedora = false; /* a consumer with its own AMQP source */
    for (size_t i = 0; i < cfg->consumer_count; i++)
        fedora |= cfg->consumers[i].fedora_messaging != NULL;
    yaml_node_t *bus = fh_yaml_map_find (ctx, node, "bus");
    if (bus && cfg->connect.count + cfg->bind.count == 0 && !cfg->amqp && !fedora) {
        fh_yaml_path_key (ctx, "bus");
        return fh_yaml_error (ctx, bus->start_mark,
                              "expected at least one endpoint in connect: or bind:, or amqp: "
                              "(or a consumer with fedora_messaging:)");
    }
    if (cfg->consumer_count == 0) {
        fh_yaml_path_key (ctx, "include");
        return fh_yaml_error (ctx, include->start_mark,
                              "no consumers: neither this file nor its %zu drop-in%s define one",
                              cfg->dropins.count, cfg->dropins.count == 1 ? "" : "s");
    }
    ctx->path[0] = '\0';
    if (!cfg->control && s_control_default (ctx, node, cfg) != 0)
        return -1;
    return s_control_exposure_check (ctx, node, cfg);
}

/* ------------------------------------------------------------------ */
/* The tables: one row a key. Kept out of clang-format, one row a key
   in a line or two, so that adding a key is a small diff. */

/* clang-format off */
static const fh_cfg_field_t s_curve_fields[] = {
    { .opt = { .name = "secret_key_file", .type = FANHUB_OPT_FILE,
               .offset = offsetof (fh_config_t, curve.secret_key_file) } },
    { .opt = { .name = "server_public_key",
               .offset = offsetof (fh_config_t, curve.server_public_key) },
      .parse = fh_cfg_parse_key },
    { .opt = { .name = "allow", .offset = offsetof (fh_config_t, curve.allow) },
      .parse = fh_cfg_parse_keys },
    { .opt = { .name = "allow_dir", .type = FANHUB_OPT_FILE,
               .offset = offsetof (fh_config_t, curve.allow_dir) } },
    { .opt = { .name = NULL } },
};

static const fh_cfg_section_t s_curve_section = { s_curve_fields, s_curve_finish };

static const fh_cfg_field_t s_control_curve_fields[] = {
    { .opt = { .name = "secret_key_file", .type = FANHUB_OPT_FILE,
               .offset = offsetof (fh_config_t, control_curve.secret_key_file) } },
    { .opt = { .name = "allow", .offset = offsetof (fh_config_t, control_curve.allow) },
      .parse = fh_cfg_parse_keys },
    { .opt = { .name = "allow_dir", .type = FANHUB_OPT_FILE,
               .offset = offsetof (fh_config_t, control_curve.allow_dir) } },
    { .opt = { .name = "client_key_file", .type = FANHUB_OPT_FILE,
               .offset = offsetof (fh_config_t, control_curve.client_key_file) } },
    { .opt = { .name = NULL } },
};

static const fh_cfg_section_t s_control_curve_section = { s_control_curve_fields,
                                                          s_control_curve_finish };

static const fh_cfg_field_t s_gaps_fields[] = {
    { .opt = { .name = "counter", .type = FANHUB_OPT_FILE,
               .offset = offsetof (fh_config_t, gaps.counter), .flags = FANHUB_OPT_REQUIRED } },
    { .opt = { .name = "producer", .offset = offsetof (fh_config_t, gaps.producer) },
      .parse = fh_cfg_parse_producer },
    { .opt = { .name = "max_producers", .type = FANHUB_OPT_UINT,
               .offset = offsetof (fh_config_t, gaps.max_producers), .min = 1, .max = 10000000 } },
    { .opt = { .name = NULL } },
};

static const fh_cfg_section_t s_gaps_section = { s_gaps_fields, NULL };

static const fh_cfg_field_t s_bus_fields[] = {
    { .opt = { .name = "connect", .offset = offsetof (fh_config_t, connect) },
      .parse = fh_cfg_parse_endpoints },
    { .opt = { .name = "bind", .offset = offsetof (fh_config_t, bind), .flags = FANHUB_OPT_BIND },
      .parse = fh_cfg_parse_endpoints },
    { .opt = { .name = "rcvhwm", .type = FANHUB_OPT_INT, .offset = offsetof (fh_config_t, rcvhwm),
               .min = 0, .max = INT_MAX } },
    { .opt = { .name = "max_frames", .type = FANHUB_OPT_UINT,
               .offset = offsetof (fh_config_t, max_frames), .min = S_MAX_FRAMES_MIN,
               .max = S_MAX_FRAMES_MAX } },
    { .opt = { .name = "max_message_bytes", .type = FANHUB_OPT_SIZE,
               .offset = offsetof (fh_config_t, max_message_bytes), .min = 1,
               .max = S_MAX_MESSAGE_BYTES_MAX } },
    { .opt = { .name = "publish", .offset = offsetof (fh_config_t, publish),
               .flags = FANHUB_OPT_BIND }, .parse = fh_cfg_parse_endpoints },
    { .opt = { .name = "gap_detection" }, .parse = fh_cfg_parse_section,
      .section = &s_gaps_section },
    { .opt = { .name = "curve" }, .parse = fh_cfg_parse_section, .section = &s_curve_section },
    { .opt = { .name = "allow_ip", .offset = offsetof (fh_config_t, allow_ip) },
      .parse = fh_cfg_parse_addresses },
    { .opt = { .name = "max_peers", .type = FANHUB_OPT_UINT,
               .offset = offsetof (fh_config_t, max_peers), .min = 1, .max = 1000000 } },
    { .opt = { .name = "amqp", .offset = offsetof (fh_config_t, amqp) },
      .parse = fh_cfg_parse_amqp },
    { .opt = { .name = "connect_warning", .type = FANHUB_OPT_DURATION,
               .offset = offsetof (fh_config_t, connect_warning_ms), .min = 0, .max = 86400,
               .flags = FH_OPT_SECONDS } },
    { .opt = { .name = "validate_signatures", .offset = offsetof (fh_config_t, signatures) },
      .parse = fh_cfg_parse_signatures, .live = true },
    { .opt = { .name = NULL } },
};

static const fh_cfg_section_t s_bus_section = { s_bus_fields, s_bus_finish };

static const char *const s_fsync_words[] = {"never", "interval", "always", NULL};
static const char *const s_log_level_words[] = {"error", "warning", "info", "debug", NULL};

static const fh_cfg_field_t s_spool_fields[] = {
    { .opt = { .name = "fsync", .type = FANHUB_OPT_ENUM,
               .offset = offsetof (fh_config_t, spool.fsync), .values = s_fsync_words } },
    { .opt = { .name = "fsync_interval", .type = FANHUB_OPT_DURATION,
               .offset = offsetof (fh_config_t, spool.fsync_interval_ms), .min = 0, .max = 3600,
               .flags = FH_OPT_SECONDS } },
    { .opt = { .name = "segment_bytes", .type = FANHUB_OPT_SIZE,
               .offset = offsetof (fh_config_t, spool.segment_bytes), .min = 4096,
               .max = (long long) 1 << 40 } },
    { .opt = { .name = NULL } },
};

static const fh_cfg_section_t s_spool_section = { s_spool_fields, NULL };

static const fh_cfg_field_t s_memory_fields[] = {
    { .opt = { .name = "max_bytes", .type = FANHUB_OPT_SIZE,
               .offset = offsetof (fh_config_t, memory_max_bytes) } },
    { .opt = { .name = NULL } },
};

static const fh_cfg_section_t s_memory_section = { s_memory_fields, NULL };

static const fh_cfg_field_t s_collectd_fields[] = {
    { .opt = { .name = "socket", .type = FANHUB_OPT_FILE,
               .offset = offsetof (fh_metrics_config_t, collectd_socket) } },
    { .opt = { .name = "interval", .type = FANHUB_OPT_DURATION,
               .offset = offsetof (fh_metrics_config_t, collectd_interval_ms), .min = 1,
               .max = 3600, .flags = FH_OPT_SECONDS } },
    { .opt = { .name = "disconnected_after", .type = FANHUB_OPT_DURATION,
               .offset = offsetof (fh_metrics_config_t, collectd_disconnected_after_ms), .min = 1,
               .max = 3600, .flags = FH_OPT_SECONDS } },
    { .opt = { .name = NULL } },
};

static const fh_cfg_section_t s_collectd_section = { s_collectd_fields, NULL };

static const fh_cfg_field_t s_prometheus_fields[] = {
    { .opt = { .name = "listen", .offset = offsetof (fh_metrics_config_t, prometheus_listen) },
      .parse = fh_cfg_parse_listen },
    { .opt = { .name = NULL } },
};

static const fh_cfg_section_t s_prometheus_section = { s_prometheus_fields, NULL };

static const fh_cfg_field_t s_metrics_fields[] = {
    { .opt = { .name = "interval", .type = FANHUB_OPT_DURATION,
               .offset = offsetof (fh_metrics_config_t, interval_ms), .min = 1, .max = 3600,
               .flags = FH_OPT_SECONDS } },
    { .opt = { .name = "collectd" }, .parse = fh_cfg_parse_section,
      .section = &s_collectd_section },
    { .opt = { .name = "prometheus" }, .parse = fh_cfg_parse_section,
      .section = &s_prometheus_section },
    { .opt = { .name = "moksha_socket", .offset = offsetof (fh_metrics_config_t, moksha_socket) },
      .parse = fh_cfg_parse_bind_endpoint },
    { .opt = { .name = "moksha_interval", .type = FANHUB_OPT_DURATION,
               .offset = offsetof (fh_metrics_config_t, moksha_interval_ms), .min = 1, .max = 3600,
               .flags = FH_OPT_SECONDS } },
    { .opt = { .name = NULL } },
};

static const fh_cfg_section_t s_metrics_section = { s_metrics_fields, NULL };

static const fh_cfg_field_t s_top_fields[] = {
    { .opt = { .name = "name", .offset = offsetof (fh_config_t, name) },
      .parse = fh_cfg_parse_name },
    { .opt = { .name = "bus", .flags = FANHUB_OPT_REQUIRED }, .parse = fh_cfg_parse_section,
      .section = &s_bus_section },
    { .opt = { .name = "control", .offset = offsetof (fh_config_t, control) },
      .parse = fh_cfg_parse_control },
    { .opt = { .name = "control_curve" }, .parse = fh_cfg_parse_section,
      .section = &s_control_curve_section },
    { .opt = { .name = "control_insecure", .type = FANHUB_OPT_BOOL,
               .offset = offsetof (fh_config_t, control_insecure) } },
    { .opt = { .name = "shutdown_timeout", .type = FANHUB_OPT_DURATION,
               .offset = offsetof (fh_config_t, shutdown_timeout_ms), .min = 0,
               .max = S_SHUTDOWN_TIMEOUT_MAX_S, .flags = FH_OPT_SECONDS }, .live = true },
    { .opt = { .name = "consumers" }, .parse = fh_cfg_parse_consumers, .live = true },
    { .opt = { .name = "state_dir", .type = FANHUB_OPT_FILE,
               .offset = offsetof (fh_config_t, state_dir) } },
    { .opt = { .name = "spool" }, .parse = fh_cfg_parse_section, .section = &s_spool_section },
    { .opt = { .name = "memory" }, .parse = fh_cfg_parse_section, .section = &s_memory_section },
    { .opt = { .name = "log_level", .type = FANHUB_OPT_ENUM,
               .offset = offsetof (fh_config_t, log_level), .values = s_log_level_words },
      .live = true },
    { .opt = { .name = "metrics", .offset = offsetof (fh_config_t, metrics) },
      .parse = fh_cfg_parse_section, .section = &s_metrics_section },
    { .opt = { .name = "include", .offset = offsetof (fh_config_t, include) },
      .parse = fh_cfg_parse_include, .live = true },
    { .opt = { .name = NULL } },
};

const fh_cfg_section_t fh_cfg_top_section = { s_top_fields, s_top_finish };
/* clang-format on */

/* ------------------------------------------------------------------ */
/* Loading                                                              */

static void
s_defaults (fh_config_t *cfg)
{
    cfg->rcvhwm = FH_DEFAULT_RCVHWM;
    cfg->connect_warning_ms = FH_DEFAULT_CONNECT_WARNING_MS;
    cfg->max_frames = FH_DEFAULT_MAX_FRAMES;
    cfg->max_message_bytes = FH_DEFAULT_MAX_MESSAGE_BYTES;
    cfg->shutdown_timeout_ms = FH_DEFAULT_SHUTDOWN_TIMEOUT_MS;
    cfg->memory_max_bytes = FH_DEFAULT_MEMORY_MAX_BYTES;
    cfg->metrics.interval_ms = FH_DEFAULT_METRICS_INTERVAL_MS;
    cfg->metrics.moksha_interval_ms = FH_DEFAULT_MOKSHA_INTERVAL_MS;
    cfg->spool.fsync = FH_FSYNC_INTERVAL;
    cfg->gaps.max_producers = 10000;
    cfg->spool.fsync_interval_ms = FH_DEFAULT_SPOOL_FSYNC_INTERVAL_MS;
    cfg->spool.segment_bytes = FH_DEFAULT_SPOOL_SEGMENT_BYTES;
    cfg->log_level = 2; /* info: index in s_log_level_words */
}

fh_config_t *
fh_config_load_string (const char *text, size_t len, const char *source, char *err, size_t errlen)
{
    fh_yaml_t ctx;
    fh_yaml_init (&ctx, source, err, errlen);
    if (fh_yaml_load (&ctx, text, len, "configuration",
                      "empty configuration: expected a map with at least bus: and consumers:"))
        return NULL;
    yaml_node_t *root = fh_yaml_root (&ctx);
    fh_config_t *cfg = calloc (1, sizeof *cfg);
    if (!cfg || !(cfg->source = strdup (ctx.source))) {
        free (cfg);
        fh_yaml_oom (&ctx, root->start_mark);
        fh_yaml_unload (&ctx);
        return NULL;
    }
    s_defaults (cfg);
    ctx.user = cfg;
    if (fh_cfg_expand_env (&ctx) || fh_cfg_parse_map (&ctx, root, &fh_cfg_top_section, cfg))
        fh_config_destroy (&cfg);
    fh_yaml_unload (&ctx);
    return cfg;
}

/* The file read once; with control_only, what a control client can make
   of it when it does not load. */
static fh_config_t *
s_load_file (const char *path, bool *control_only, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    size_t len = 0;
    char *text = fh_yaml_read_file (path, &len, err, errlen);
    if (!text)
        return NULL;
    fh_config_t *cfg = fh_config_load_string (text, len, path, err, errlen);
    if (!cfg && control_only && (cfg = fh_config_control_only (text, len, path)))
        *control_only = true;
    free (text);
    return cfg;
}

fh_config_t *
fh_config_load_for_control (const char *path, bool *control_only, char *err, size_t errlen)
{
    *control_only = false;
    return s_load_file (path, control_only, err, errlen);
}

fh_config_t *
fh_config_load_file (const char *path, char *err, size_t errlen)
{
    return s_load_file (path, NULL, err, errlen);
}

void
fh_config_destroy (fh_config_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    fh_config_t *self = *self_p;
    *self_p = NULL;
    for (size_t i = 0; i < self->consumer_count; i++) {
        fh_consumer_config_t *consumer = &self->consumers[i];
        free (consumer->name);
        free (consumer->plugin);
        fh_cfg_strlist_clear (&consumer->topics);
        fh_option_destroy (&consumer->options);
        free (consumer->where);
        free (consumer->order_by);
        fh_cfg_publish_clear (&consumer->publish);
        json_decref (consumer->fedora_messaging);
    }
    free (self->consumers);
    fh_cfg_strlist_clear (&self->include);
    fh_cfg_strlist_clear (&self->dropins);
    fh_cfg_strlist_clear (&self->warnings);
    fh_cfg_strlist_clear (&self->connect);
    fh_cfg_strlist_clear (&self->bind);
    free (self->source);
    free (self->name);
    free (self->control);
    free (self->metrics.collectd_socket);
    free (self->state_dir);
    free (self->gaps.counter);
    free (self->gaps.producer);
    fh_cfg_strlist_clear (&self->publish);
    fh_option_destroy (&self->amqp);
    fh_option_destroy (&self->signatures);
    free (self->curve.secret_key_file);
    free (self->curve.server_public_key);
    fh_cfg_strlist_clear (&self->curve.allow);
    free (self->curve.allow_dir);
    memset (self->curve.secret_key, 0, sizeof self->curve.secret_key);
    fh_cfg_strlist_clear (&self->allow_ip);
    free (self->control_curve.secret_key_file);
    fh_cfg_strlist_clear (&self->control_curve.allow);
    free (self->control_curve.allow_dir);
    free (self->control_curve.client_key_file);
    memset (self->control_curve.secret_key, 0, sizeof self->control_curve.secret_key);
    memset (self->control_curve.client_secret_key, 0, sizeof self->control_curve.client_secret_key);
    free (self->metrics.prometheus_listen);
    free (self->metrics.moksha_socket);
    free (self);
}
