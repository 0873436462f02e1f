/*  source_amqp_settings - reading and checking bus.amqp. See source_amqp.h
    and source_amqp_settings.h. The keys it shares with the amqp plugin
    come from one table (consumers/amqp/amqp_options.h), read by the
    host's option-table reader as a plugin's options are; what follows the
    table here is what it cannot say (the url, defaults from it, keys
    that go together). */
#include "source_amqp_settings.h"

#include "../../consumers/amqp/amqp_options.h"
#include "option_table.h"
#include "options.h"

#include <fanhub/sdk.h>

#include <amqp.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* bus.amqp as the table reads it: the shared keys, then the hub's own. */
typedef struct {
    amqp_shared_t c;
    int64_t prefetch, heartbeat, reconnect_max, standby_delay;
    const fanhub_option_t *prefer;
    int64_t prefer_index, prefer_count;
    bool loop_guard;
} s_raw_t;

static const fanhub_opt_t s_table[] = {
    AMQP_SHARED_OPTIONS (s_raw_t, c),
    FANHUB_OPT_FIELD (s_raw_t, "prefetch", FANHUB_OPT_INT, prefetch, "100", 1, 65535,
                      "basic.qos per channel"),
    FANHUB_OPT_FIELD (s_raw_t, "heartbeat", FANHUB_OPT_INT, heartbeat, "30", 0, 3600,
                      "AMQP heartbeat in seconds (0: none)"),
    FANHUB_OPT_FIELD (s_raw_t, "reconnect_max", FANHUB_OPT_INT, reconnect_max, "10", 1, 3600,
                      "the longest wait between reconnections, in seconds"),
    FANHUB_OPT_FIELD (s_raw_t, "prefer", FANHUB_OPT_MAP, prefer, NULL, 0, 0,
                      "{index: I, count: N}: shards s with s % N == I first"),
    {"prefer.index", FANHUB_OPT_INT, offsetof (s_raw_t, prefer_index), NULL, 0, 1023, NULL,
     FANHUB_OPT_REQUIRED, "I of {index: I, count: N}, 0 <= I < N"},
    {"prefer.count", FANHUB_OPT_INT, offsetof (s_raw_t, prefer_count), NULL, 1, 1024, NULL,
     FANHUB_OPT_REQUIRED, "N of {index: I, count: N}, 1 to 1024"},
    FANHUB_OPT_FIELD (s_raw_t, "standby_delay", FANHUB_OPT_INT, standby_delay, "5", 0, 3600,
                      "then the other shards, this many seconds later"),
    FANHUB_OPT_FIELD (s_raw_t, "loop_guard", FANHUB_OPT_BOOL, loop_guard, "true", 0, 0,
                      "mark deliveries so the amqp plugin does not publish them again"),
    FANHUB_OPT_END,
};

/* "bus.amqp.KEY: WHY (FILE:LINE:COL)", node's place. */
static int s_fail (char *err, size_t errlen, const fanhub_option_t *node, const char *key,
                   const char *fmt, ...) __attribute__ ((format (printf, 5, 6)));

static int
s_fail (char *err, size_t errlen, const fanhub_option_t *node, const char *key, const char *fmt,
        ...)
{
    char why[512];
    va_list args;
    va_start (args, fmt);
    vsnprintf (why, sizeof why, fmt, args);
    va_end (args);
    snprintf (err, errlen, "bus.amqp%s%s: %s (%s)", *key ? "." : "", key, why,
              fh_option_where (node));
    return -1;
}

/* The reader names keys as a plugin's ("options.KEY: ..."); here they are
   bus.amqp's. */
static void
s_reword (char *err, size_t errlen)
{
    static const char from[] = "options.", to[] = "bus.amqp.";
    size_t len = strlen (err);
    if (strncmp (err, from, sizeof from - 1) != 0 || len + 2 >= errlen)
        return;
    memmove (err + sizeof to - 1, err + sizeof from - 1, len - (sizeof from - 1) + 1);
    memcpy (err, to, sizeof to - 1);
}

static char *
s_dup (const char *text, bool *oom)
{
    char *copy = text ? strdup (text) : NULL;
    *oom |= text && !copy;
    return copy;
}

/* url: amqp://[USER@]HOST[:PORT][/VHOST] or amqps://...; vhost and user
   default to the url's. */
static int
s_url (const fanhub_option_t *node, const char *vhost, fh_amqp_settings_t *self, char *err,
       size_t errlen)
{
    const char *text = fh_option_scalar (node);
    if (amqp_url_has_password (text))
        return s_fail (err, errlen, node, "url",
                       "no password in the url: use password_file: or password_env:");
    char *copy = strdup (text);
    if (!copy)
        return s_fail (err, errlen, node, "url", "out of memory");
    struct amqp_connection_info info;
    amqp_default_connection_info (&info);
    int rc = amqp_parse_url (copy, &info);
    if (rc != AMQP_STATUS_OK || !info.host || !*info.host) {
        free (copy);
        return s_fail (err, errlen, node, "url",
                       "expected amqp://HOST[:PORT][/VHOST] or amqps://..., got '%s'", text);
    }
    bool oom = false, user_in_url = strchr (text, '@') != NULL;
    self->host = s_dup (info.host, &oom);
    self->port = info.port;
    self->tls = info.ssl;
    self->url_user = user_in_url ? s_dup (info.user, &oom) : NULL;
    self->vhost = s_dup (vhost ? vhost : info.vhost && *info.vhost ? info.vhost : "/", &oom);
    free (copy);
    return oom ? s_fail (err, errlen, node, "url", "out of memory") : 0;
}

/* The table's values the settings keep, copied, with their defaults. */
static int
s_take (const fanhub_option_t *tree, s_raw_t *raw, fh_amqp_settings_t *self, char *err,
        size_t errlen)
{
    const fanhub_option_t *url = fh_option_get (tree, "url");
    if (!url)
        return s_fail (err, errlen, tree, "url", "required key is missing");
    if (!raw->c.queue)
        return s_fail (err, errlen, tree, "queue", "required key is missing");
    if (raw->c.password_given)
        return s_fail (err, errlen, fh_option_get (tree, "password"), "password",
                       "a password is never taken from the YAML; set password_file (a file of "
                       "mode 0600) or password_env");
    if (s_url (url, fh_option_get (tree, "vhost") ? raw->c.vhost : NULL, self, err, errlen))
        return -1;
    bool oom = false;
    const char *user = fh_option_get (tree, "user") ? raw->c.user : self->url_user;
    self->user = s_dup (user ? user : "guest", &oom);
    self->password = raw->c.password; /* ours now */
    raw->c.password = NULL;
    self->queue = s_dup (raw->c.queue, &oom);
    self->exchange = s_dup (raw->c.exchange, &oom);
    self->queue_type = s_dup (raw->c.queue_type ? "quorum" : "classic", &oom);
    self->hash_header = s_dup (raw->c.hash_header, &oom);
    self->dead_letter_exchange = s_dup (raw->c.dead_letter_exchange, &oom);
    self->ca_file = s_dup (raw->c.ca_file, &oom);
    self->cert_file = s_dup (raw->c.cert_file, &oom);
    self->key_file = s_dup (raw->c.key_file, &oom);
    self->hash_exchange = s_dup (raw->c.hash_exchange, &oom);
    if (!raw->c.hash_exchange && self->queue) {
        size_t len = strlen (self->queue) + sizeof ".hash";
        if ((self->hash_exchange = malloc (len)))
            snprintf (self->hash_exchange, len, "%s.hash", self->queue);
        oom |= !self->hash_exchange;
    }
    const fanhub_option_t *bindings = raw->c.bindings;
    size_t count = bindings ? fh_option_count (bindings) : 1;
    self->bindings = calloc (count ? count : 1, sizeof *self->bindings);
    for (size_t i = 0; self->bindings && i < count; i++)
        if ((self->bindings[i]
             = s_dup (bindings ? fh_option_scalar (fh_option_at (bindings, i, NULL)) : "#", &oom)))
            self->binding_count++;
    oom |= !self->bindings;
    return oom ? s_fail (err, errlen, tree, "", "out of memory") : 0;
}

/* Numbers and switches, and the checks across keys. */
static int
s_finish (const fanhub_option_t *tree, const s_raw_t *raw, fh_amqp_settings_t *self, char *err,
          size_t errlen)
{
    self->shards = (size_t) raw->c.shards;
    self->prefetch = (size_t) raw->prefetch;
    self->heartbeat_s = (int) raw->heartbeat;
    self->declare = raw->c.declare;
    self->reconnect_max_ms = raw->reconnect_max * 1000;
    self->standby_delay_ms = raw->standby_delay * 1000;
    self->prefer_index = (size_t) raw->prefer_index;
    self->prefer_count = (size_t) raw->prefer_count;
    self->verify_peer = raw->c.verify_peer;
    self->verify_hostname = !raw->c.tls || !fh_option_get (raw->c.tls, "verify_hostname")
                            || raw->c.verify_hostname;
    self->fedora_envelope = raw->c.envelope == 1;
    self->loop_guard = raw->loop_guard;
    if (!self->password) {
        if (strcmp (self->user, "guest") != 0)
            return s_fail (err, errlen, tree, "password_file",
                           "required for user '%s' (or password_env); the password is never "
                           "read from this file",
                           self->user);
        if (!(self->password = strdup ("guest"))) /* RabbitMQ's default account */
            return s_fail (err, errlen, tree, "", "out of memory");
    }
    const fanhub_option_t *tls = raw->c.tls;
    if (tls && !self->tls)
        return s_fail (err, errlen, tls, "tls", "needs an amqps:// url");
    if (self->tls && self->verify_peer && !self->ca_file)
        return s_fail (err, errlen, tls ? tls : tree, "tls.ca_file",
                       "required to verify the broker (or tls.verify_peer: false)");
    if (!self->cert_file != !self->key_file)
        return s_fail (err, errlen, tls, "tls", "cert_file and key_file go together");
    if (raw->prefer && !self->shards)
        return s_fail (err, errlen, raw->prefer, "prefer", "only with shards: N");
    if (raw->prefer && raw->prefer_index >= raw->prefer_count)
        return s_fail (err, errlen, raw->prefer, "prefer", "expected {index: I, count: N}, I < N");
    const fanhub_option_t *hash = fh_option_get (tree, "hash_exchange");
    hash = hash ? hash : fh_option_get (tree, "hash_header");
    if (hash && !self->shards)
        return s_fail (err, errlen, hash, "hash_exchange, hash_header", "only with shards: N");
    return 0;
}

/* What the option-table reader asks of a host: walking the tree, no
   more (so that this file needs nothing of the plugin host). */
static const fanhub_host_t s_tree_reader = {
    .option_kind = fh_option_kind,
    .option_get = fh_option_get,
    .option_scalar = fh_option_scalar,
    .option_count = fh_option_count,
    .option_at = fh_option_at,
    .option_where = fh_option_where,
};

fh_amqp_settings_t *
fh_amqp_settings_new (const fanhub_option_t *tree, char *err, size_t errlen)
{
    fh_amqp_settings_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "bus.amqp: out of memory");
        return NULL;
    }
    s_raw_t raw;
    memset (&raw, 0, sizeof raw);
    int rc = fh_option_kind (tree) == FANHUB_OPTION_MAP
                 ? 0
                 : s_fail (err, errlen, tree, "", "expected a map (url:, queue:, ...)");
    if (rc == 0
        && fh_option_table_read (&s_tree_reader, "bus.amqp", s_table, tree, &raw, sizeof raw, err,
                                 errlen)) {
        s_reword (err, errlen);
        rc = -1;
    }
    if (rc == 0)
        rc = s_take (tree, &raw, self, err, errlen) || s_finish (tree, &raw, self, err, errlen);
    if (raw.c.password) {
        memset (raw.c.password, 0, strlen (raw.c.password));
        free (raw.c.password);
    }
    if (rc != 0)
        fh_amqp_settings_destroy (&self);
    return self;
}

void
fh_amqp_settings_destroy (fh_amqp_settings_t **self_p)
{
    fh_amqp_settings_t *self = *self_p;
    if (!self)
        return;
    free (self->host);
    free (self->vhost);
    free (self->user);
    free (self->url_user);
    if (self->password)
        memset (self->password, 0, strlen (self->password));
    free (self->password);
    free (self->queue);
    free (self->exchange);
    for (size_t i = 0; i < self->binding_count; i++)
        free (self->bindings[i]);
    free (self->bindings);
    free (self->hash_exchange);
    free (self->hash_header);
    free (self->queue_type);
    free (self->dead_letter_exchange);
    free (self->ca_file);
    free (self->cert_file);
    free (self->key_file);
    json_decref (self->fedora);
    free (self->target);
    free (self);
    *self_p = NULL;
}
