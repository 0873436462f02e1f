/*  source_amqp_settings - reading and checking bus.amqp. See source_amqp.h
    and source_amqp_settings.h. */
#include "source_amqp_settings.h"

#include "options.h"
#include "value.h"

#include <fanhub/sdk.h>

#include <amqp.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define S_MAX_SHARDS 1024

typedef struct {
    const char **where;
    char *why;
    size_t whylen;
} s_err_t;

static int s_fail (s_err_t *err, const fanhub_option_t *node, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static int
s_fail (s_err_t *err, const fanhub_option_t *node, const char *fmt, ...)
{
    *err->where = fh_option_where (node);
    va_list args;
    va_start (args, fmt);
    vsnprintf (err->why, err->whylen, fmt, args);
    va_end (args);
    return -1;
}

/* A scalar's text, or NULL (and the error) when node is not one. */
static const char *
s_text (s_err_t *err, const fanhub_option_t *node, const char *key)
{
    const char *text = fh_option_scalar (node);
    if (!text)
        s_fail (err, node, "%s: expected a scalar", key);
    return text;
}

static int
s_string (s_err_t *err, const fanhub_option_t *node, const char *key, char **slot, bool empty_ok)
{
    const char *text = s_text (err, node, key);
    if (!text)
        return -1;
    if (!*text && !empty_ok)
        return s_fail (err, node, "%s: expected a non-empty string", key);
    free (*slot);
    *slot = strdup (text);
    return *slot ? 0 : s_fail (err, node, "%s: out of memory", key);
}

static int
s_integer (s_err_t *err, const fanhub_option_t *node, const char *key, long long min, long long max,
           long long *out)
{
    const char *text = s_text (err, node, key);
    if (!text)
        return -1;
    char *end = NULL;
    errno = 0;
    long long value = strtoll (text, &end, 10);
    if (errno || end == text || *end || value < min || value > max)
        return s_fail (err, node, "%s: expected an integer from %lld to %lld, got '%s'", key, min,
                       max, text);
    *out = value;
    return 0;
}

static int
s_bool (s_err_t *err, const fanhub_option_t *node, const char *key, bool *out)
{
    const char *text = s_text (err, node, key);
    if (!text)
        return -1;
    if (fh_value_bool (text, out))
        return 0;
    return s_fail (err, node, "%s: expected true or false, got '%s'", key, text);
}

/* password_file (its first line) or password_env, read as every plugin
   reads its secrets (fanhub_secret_read: the file's mode checked, the
   variable set and not empty). */
static int
s_password (s_err_t *err, const fanhub_option_t *node, const char *key, fh_amqp_settings_t *self)
{
    const char *name = s_text (err, node, key);
    if (!name)
        return -1;
    bool env = strcmp (key, "password_env") == 0;
    char why[512];
    char *secret = fanhub_secret_read (env ? NULL : name, env ? name : NULL, why, sizeof why);
    if (!secret)
        return s_fail (err, node, "%s: %s", key, why);
    if (self->password) {
        memset (self->password, 0, strlen (self->password));
        free (self->password);
    }
    self->password = secret;
    return 0;
}

/* url: amqp://HOST[:PORT][/VHOST] or amqps://...; no credentials in it. */
static int
s_url (s_err_t *err, const fanhub_option_t *node, fh_amqp_settings_t *self)
{
    const char *text = s_text (err, node, "url");
    if (!text)
        return -1;
    /* A user may be in the url (amqp://USER@HOST), never a password. */
    const char *scheme_end = strstr (text, "://");
    const char *at = scheme_end ? strchr (scheme_end + 3, '@') : NULL;
    if (at && memchr (scheme_end + 3, ':', (size_t) (at - scheme_end - 3)))
        return s_fail (err, node,
                       "url: no password in the url: use password_file: or "
                       "password_env:");
    char *copy = strdup (text);
    if (!copy)
        return s_fail (err, node, "url: out of memory");
    struct amqp_connection_info info;
    amqp_default_connection_info (&info);
    int rc = amqp_parse_url (copy, &info);
    if (rc != AMQP_STATUS_OK || !info.host || !*info.host) {
        free (copy);
        return s_fail (err, node,
                       "url: expected amqp://HOST[:PORT][/VHOST] or amqps://..., "
                       "got '%s'",
                       text);
    }
    if (at && !self->url_user)
        self->url_user = strdup (info.user);
    free (self->host);
    self->host = strdup (info.host);
    self->port = info.port;
    self->tls = info.ssl;
    if (!self->vhost)
        self->vhost = strdup (info.vhost && *info.vhost ? info.vhost : "/");
    free (copy);
    return self->host && self->vhost ? 0 : s_fail (err, node, "url: out of memory");
}

static int
s_bindings (s_err_t *err, const fanhub_option_t *node, fh_amqp_settings_t *self)
{
    if (fh_option_kind (node) != FANHUB_OPTION_LIST)
        return s_fail (err, node, "bindings: expected a list of binding keys");
    size_t count = fh_option_count (node);
    char **keys = calloc (count ? count : 1, sizeof *keys);
    if (!keys)
        return s_fail (err, node, "bindings: out of memory");
    for (size_t i = 0; i < self->binding_count; i++)
        free (self->bindings[i]);
    free (self->bindings);
    self->bindings = keys;
    self->binding_count = 0;
    for (size_t i = 0; i < count; i++) {
        if (s_string (err, fh_option_at (node, i, NULL), "bindings[]", &keys[i], true))
            return -1;
        self->binding_count++;
    }
    return 0;
}

static int
s_tls (s_err_t *err, const fanhub_option_t *node, fh_amqp_settings_t *self)
{
    if (fh_option_kind (node) != FANHUB_OPTION_MAP)
        return s_fail (err, node,
                       "tls: expected a map (ca_file, cert_file, key_file, "
                       "verify_peer, verify_hostname)");
    for (size_t i = 0; i < fh_option_count (node); i++) {
        const char *key = NULL;
        const fanhub_option_t *value = fh_option_at (node, i, &key);
        int rc = strcmp (key, "ca_file") == 0
                     ? s_string (err, value, "tls.ca_file", &self->ca_file, false)
                 : strcmp (key, "cert_file") == 0
                     ? s_string (err, value, "tls.cert_file", &self->cert_file, false)
                 : strcmp (key, "key_file") == 0
                     ? s_string (err, value, "tls.key_file", &self->key_file, false)
                 : strcmp (key, "verify_peer") == 0
                     ? s_bool (err, value, "tls.verify_peer", &self->verify_peer)
                 : strcmp (key, "verify_hostname") == 0
                     ? s_bool (err, value, "tls.verify_hostname", &self->verify_hostname)
                     : s_fail (err, value,
                               "tls.%s: unknown key (known: ca_file, cert_file, "
                               "key_file, verify_peer, verify_hostname)",
                               key);
        if (rc)
            return -1;
    }
    return 0;
}

/* prefer: {index: I, count: N}, 0 <= I < N. */
static int
s_prefer (s_err_t *err, const fanhub_option_t *node, fh_amqp_settings_t *self)
{
    const fanhub_option_t *index = fh_option_get (node, "index");
    const fanhub_option_t *count = fh_option_get (node, "count");
    long long i, n;
    if (fh_option_kind (node) != FANHUB_OPTION_MAP || fh_option_count (node) != 2 || !index
        || !count)
        return s_fail (err, node, "prefer: expected {index: I, count: N}");
    if (s_integer (err, count, "prefer.count", 1, S_MAX_SHARDS, &n)
        || s_integer (err, index, "prefer.index", 0, n - 1, &i))
        return -1;
    self->prefer_index = (size_t) i;
    self->prefer_count = (size_t) n;
    return 0;
}

/* envelope: none or fedora-messaging (source_amqp_envelope.c); and
   loop_guard. */
static int
s_envelope (s_err_t *err, const char *key, const fanhub_option_t *value, fh_amqp_settings_t *self)
{
    if (strcmp (key, "loop_guard") == 0)
        return s_bool (err, value, key, &self->loop_guard);
    const char *text = s_text (err, value, "envelope");
    if (!text)
        return -1;
    if (strcmp (text, "none") != 0 && strcmp (text, "fedora-messaging") != 0)
        return s_fail (err, value, "envelope: expected none or fedora-messaging, got '%s'", text);
    self->fedora_envelope = strcmp (text, "fedora-messaging") == 0;
    return 0;
}

/* One key of bus.amqp. */
static int
s_key (s_err_t *err, const char *key, const fanhub_option_t *value, fh_amqp_settings_t *self)
{
    long long number;
    if (strcmp (key, "url") == 0)
        return s_url (err, value, self);
    if (strcmp (key, "queue") == 0)
        return s_string (err, value, key, &self->queue, false);
    if (strcmp (key, "shards") == 0) {
        if (s_integer (err, value, key, 0, S_MAX_SHARDS, &number))
            return -1;
        self->shards = (size_t) number;
        return 0;
    }
    if (strcmp (key, "prefetch") == 0) {
        if (s_integer (err, value, key, 1, 65535, &number))
            return -1;
        self->prefetch = (size_t) number;
        return 0;
    }
    if (strcmp (key, "heartbeat") == 0) {
        if (s_integer (err, value, key, 0, 3600, &number))
            return -1;
        self->heartbeat_s = (int) number;
        return 0;
    }
    if (strcmp (key, "reconnect_max") == 0) {
        if (s_integer (err, value, key, 1, 3600, &number))
            return -1;
        self->reconnect_max_ms = number * 1000;
        return 0;
    }
    if (strcmp (key, "prefer") == 0)
        return s_prefer (err, value, self);
    if (strcmp (key, "standby_delay") == 0) {
        if (s_integer (err, value, key, 0, 3600, &number))
            return -1;
        self->standby_delay_ms = number * 1000;
        return 0;
    }
    if (strcmp (key, "user") == 0)
        return s_string (err, value, key, &self->user, false);
    if (strcmp (key, "password_file") == 0 || strcmp (key, "password_env") == 0)
        return s_password (err, value, key, self);
    if (strcmp (key, "vhost") == 0)
        return s_string (err, value, key, &self->vhost, false);
    if (strcmp (key, "declare") == 0)
        return s_bool (err, value, key, &self->declare);
    if (strcmp (key, "exchange") == 0)
        return s_string (err, value, key, &self->exchange, true);
    if (strcmp (key, "bindings") == 0)
        return s_bindings (err, value, self);
    if (strcmp (key, "hash_exchange") == 0)
        return s_string (err, value, key, &self->hash_exchange, false);
    if (strcmp (key, "hash_header") == 0)
        return s_string (err, value, key, &self->hash_header, false);
    if (strcmp (key, "dead_letter_exchange") == 0)
        return s_string (err, value, key, &self->dead_letter_exchange, false);
    if (strcmp (key, "queue_type") == 0) {
        const char *text = s_text (err, value, key);
        if (!text)
            return -1;
        if (strcmp (text, "classic") != 0 && strcmp (text, "quorum") != 0)
            return s_fail (err, value, "queue_type: expected classic or quorum, got '%s'", text);
        return s_string (err, value, key, &self->queue_type, false);
    }
    if (strcmp (key, "tls") == 0)
        return s_tls (err, value, self);
    if (strcmp (key, "envelope") == 0 || strcmp (key, "loop_guard") == 0)
        return s_envelope (err, key, value, self);
    return s_fail (err, value,
                   "%s: unknown key (known: url, queue, shards, prefetch, user, password_file, "
                   "password_env, vhost, heartbeat, reconnect_max, declare, exchange, bindings, "
                   "hash_exchange, hash_header, queue_type, dead_letter_exchange, prefer, "
                   "standby_delay, tls, envelope, loop_guard)",
                   key);
}

/* Defaults, and the checks across keys. */
static int
s_finish (s_err_t *err, const fanhub_option_t *tree, fh_amqp_settings_t *self)
{
    if (!fh_option_get (tree, "url"))
        return s_fail (err, tree, "url: required key is missing");
    if (!self->queue)
        return s_fail (err, tree, "queue: required key is missing");
    if (fh_option_get (tree, "password_file") && fh_option_get (tree, "password_env"))
        return s_fail (err, fh_option_get (tree, "password_env"),
                       "password_env: give password_file or password_env, not both");
    if (!self->user)
        self->user = strdup (self->url_user ? self->url_user : "guest");
    if (!self->password) {
        if (self->user && strcmp (self->user, "guest") != 0)
            return s_fail (err, tree,
                           "password_file: required for user '%s' (or "
                           "password_env); the password is never read from "
                           "this file",
                           self->user);
        self->password = strdup ("guest"); /* RabbitMQ's default account */
    }
    if (!self->exchange)
        self->exchange = strdup ("amq.topic");
    if (!self->bindings) {
        self->bindings = calloc (1, sizeof *self->bindings);
        if (self->bindings && (self->bindings[0] = strdup ("#")))
            self->binding_count = 1;
    }
    if (!self->queue_type)
        self->queue_type = strdup ("classic");
    if (!self->hash_exchange && self->queue) {
        size_t len = strlen (self->queue) + sizeof ".hash";
        self->hash_exchange = malloc (len);
        if (self->hash_exchange)
            snprintf (self->hash_exchange, len, "%s.hash", self->queue);
    }
    if (!self->user || !self->password || !self->exchange || !self->bindings || !self->queue_type
        || !self->hash_exchange)
        return s_fail (err, tree, "out of memory");
    const fanhub_option_t *tls = fh_option_get (tree, "tls");
    if (tls && !self->tls)
        return s_fail (err, tls, "tls: needs an amqps:// url");
    if (self->tls && self->verify_peer && !self->ca_file)
        return s_fail (err, tls ? tls : tree,
                       "tls.ca_file: required to verify the broker "
                       "(or tls.verify_peer: false)");
    if (!self->cert_file != !self->key_file)
        return s_fail (err, tls, "tls: cert_file and key_file go together");
    if (fh_option_get (tree, "prefer") && !self->shards)
        return s_fail (err, fh_option_get (tree, "prefer"), "prefer: only with shards: N");
    if ((fh_option_get (tree, "hash_exchange") || fh_option_get (tree, "hash_header"))
        && !self->shards)
        return s_fail (err,
                       fh_option_get (tree, "hash_exchange") ? fh_option_get (tree, "hash_exchange")
                                                             : fh_option_get (tree, "hash_header"),
                       "hash_exchange, hash_header: only with shards: N");
    return 0;
}

fh_amqp_settings_t *
fh_amqp_settings_new (const fanhub_option_t *tree, const char **where, char *why, size_t whylen)
{
    const char *unused = NULL;
    s_err_t err = {where ? where : &unused, why, whylen};
    fh_amqp_settings_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (why, whylen, "out of memory");
        return NULL;
    }
    self->prefetch = 100;
    self->heartbeat_s = 30;
    self->reconnect_max_ms = 10000;
    self->standby_delay_ms = 5000;
    self->verify_peer = self->verify_hostname = true;
    self->loop_guard = true;
    int rc = 0;
    if (fh_option_kind (tree) != FANHUB_OPTION_MAP)
        rc = s_fail (&err, tree, "expected a map");
    for (size_t i = 0; rc == 0 && i < fh_option_count (tree); i++) {
        const char *key = NULL;
        const fanhub_option_t *value = fh_option_at (tree, i, &key);
        rc = s_key (&err, key, value, self);
    }
    if (rc == 0)
        rc = s_finish (&err, tree, self);
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
    free (self);
    *self_p = NULL;
}
