/*  options.c - the amqp plugin's options: its option table (the hub
    reads the keys, the tls and topic_prefix maps and the password, their
    types and ranges, with FILE:LINE:COL errors, and `fanhub plugins
    --options amqp` prints it), then what the table cannot say: the url,
    the TLS files' modes and the keys that exclude each other. The keys
    bus.amqp has too come first, from amqp_options.h (one table for both).
    The keys are documented in docs/plugins/amqp.md; init and check read
    them the same way.

    Secrets never come from the YAML alone: a password written in the
    options (a `password` key, or a password inside the url) is refused, and
    the password comes from password_file (mode 0600 or stricter) or
    password_env. No error message holds a password.
*/
#include "amqp_options.h"
#include "bridge.h"

#include <fanhub/sdk.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <amqp.h>

#define OPT_MS_MAX 3600000
#define DEFAULT_HOST "127.0.0.1"
#define DEFAULT_PORT 5672
#define DEFAULT_TLS_PORT 5671

/* The options as the host reads them from the table: the keys bus.amqp
   shares (amqp_options.h), then the plugin's own. */
typedef struct {
    amqp_shared_t c;
    const char *host;
    int64_t port; /* -1: not given (its default depends on TLS) */
    const fanhub_option_t *topic_prefix;
    const char *from, *to;
    int64_t confirm_timeout_ms;
    int64_t connect_timeout_ms;
    int64_t reconnect_max_ms;
    int64_t heartbeat_s;
    bool mandatory;
    int body; /* 0 whole, 1 msg */
    const char *schema;
    int64_t severity;
    const fanhub_option_t *schemas, *severities;
} s_raw_t;

static const char *const s_bodies[] = {"whole", "msg", NULL};

const fanhub_opt_t bridge_option_table[] = {
    AMQP_SHARED_URL (s_raw_t, c),
    FANHUB_OPT_FIELD (s_raw_t, "host", FANHUB_OPT_STRING, host, DEFAULT_HOST, 1,
                      BRIDGE_SHORTSTR_MAX, "the broker's host name or address"),
    FANHUB_OPT_FIELD (s_raw_t, "port", FANHUB_OPT_INT, port, NULL, 1, 65535,
                      "the broker's port (default 5672, TLS 5671)"),
    AMQP_SHARED_LOGIN (s_raw_t, c),
    FANHUB_OPT_FIELD (s_raw_t, "topic_prefix", FANHUB_OPT_MAP, topic_prefix, NULL, 0, 0,
                      "{from: PREFIX, to: PREFIX}: rewrite the start of topics"),
    {"topic_prefix.from", FANHUB_OPT_STRING, offsetof (s_raw_t, from), NULL, 0, 0, NULL,
     FANHUB_OPT_REQUIRED, "the prefix to replace (\"\" is allowed)"},
    {"topic_prefix.to", FANHUB_OPT_STRING, offsetof (s_raw_t, to), NULL, 0, 0, NULL,
     FANHUB_OPT_REQUIRED, "what replaces it (\"\" is allowed)"},
    FANHUB_OPT_FIELD (s_raw_t, "confirm_timeout_ms", FANHUB_OPT_DURATION, confirm_timeout_ms,
                      "30000", 100, OPT_MS_MAX,
                      "the longest a published message waits for its confirm"),
    FANHUB_OPT_FIELD (s_raw_t, "connect_timeout_ms", FANHUB_OPT_DURATION, connect_timeout_ms,
                      "10000", 100, OPT_MS_MAX, "TCP connect, login and each start-up RPC"),
    FANHUB_OPT_FIELD (s_raw_t, "reconnect_max_ms", FANHUB_OPT_DURATION, reconnect_max_ms, "10000",
                      100, OPT_MS_MAX, "the longest wait between reconnection attempts"),
    FANHUB_OPT_FIELD (s_raw_t, "heartbeat_s", FANHUB_OPT_INT, heartbeat_s, "30", 0, 3600,
                      "AMQP heartbeat asked for (0: none)"),
    FANHUB_OPT_FIELD (s_raw_t, "mandatory", FANHUB_OPT_BOOL, mandatory, "true", 0, 0,
                      "publish mandatory: a message no queue takes comes back, held"),
    AMQP_SHARED_ENVELOPE (s_raw_t, c),
    {"body", FANHUB_OPT_ENUM, offsetof (s_raw_t, body), "whole", 0, 0, s_bodies, 0,
     "with fedora-messaging: the whole fedmsg body, or its msg"},
    FANHUB_OPT_FIELD (s_raw_t, "schema", FANHUB_OPT_STRING, schema, "base.message", 1,
                      BRIDGE_SHORTSTR_MAX, "with fedora-messaging: the schema header"),
    FANHUB_OPT_FIELD (s_raw_t, "severity", FANHUB_OPT_INT, severity, "20", 10, 50,
                      "with fedora-messaging: the severity header (10 DEBUG ... 40 ERROR)"),
    FANHUB_OPT_FIELD (s_raw_t, "schemas", FANHUB_OPT_MAP, schemas, NULL, 0, 0,
                      "{TOPIC_PREFIX: SCHEMA}: the schema of topics, first match"),
    FANHUB_OPT_FIELD (s_raw_t, "severities", FANHUB_OPT_MAP, severities, NULL, 0, 0,
                      "{TOPIC_PREFIX: 10|20|30|40}: the severity of topics, first match"),
    AMQP_SHARED_TOPOLOGY (s_raw_t, c),
    FANHUB_OPT_END,
};

static int
s_copy (char **dst, const char *src, char *err, size_t errlen)
{
    free (*dst);
    *dst = strdup (src);
    if (!*dst) {
        snprintf (err, errlen, "amqp: out of memory");
        return -1;
    }
    return 0;
}

/* A file the plugin will read: it must be a readable regular file; a
   secret one (a password, a private key) must not be open to the group or
   others. */
static int
s_check_file (const fanhub_host_t *host, const fanhub_option_t *node, const char *key,
              const char *path, bool secret, char *err, size_t errlen)
{
    struct stat st;
    FILE *file = fopen (path, "r");
    if (!file || fstat (fileno (file), &st) != 0) {
        snprintf (err, errlen, "options.%s: %s: %s (%s)", key, path, strerror (errno),
                  host->option_where (node));
        if (file)
            fclose (file);
        return -1;
    }
    fclose (file);
    char why[512];
    if (secret && fanhub_secret_file_check (path, "the key", why, sizeof why) != 0) {
        snprintf (err, errlen, "options.%s: %s (%s)", key, why, host->option_where (node));
        return -1;
    }
    if (!S_ISREG (st.st_mode)) {
        snprintf (err, errlen, "options.%s: %s: not a regular file; refusing it (%s)", key, path,
                  host->option_where (node));
        return -1;
    }
    return 0;
}

/* options.url: amqp://[USER@]HOST[:PORT][/VHOST] or amqps://...; a
   password in it is refused. */
static int
s_url (const fanhub_host_t *host, const fanhub_option_t *node, bridge_options_t *out, char *err,
       size_t errlen)
{
    const char *url = host->option_scalar (node);
    const char *where = host->option_where (node);
    if (amqp_url_has_password (url)) {
        /* Not repeated: the url holds the password. */
        snprintf (err, errlen,
                  "options.url: holds a password; a password is never taken "
                  "from the YAML: give the url without it and set password_file or "
                  "password_env (%s)",
                  where);
        return -1;
    }
    char *copy = strdup (url);
    if (!copy) {
        snprintf (err, errlen, "amqp: out of memory");
        return -1;
    }
    struct amqp_connection_info info;
    amqp_default_connection_info (&info);
    int rc = amqp_parse_url (copy, &info);
    if (rc == AMQP_STATUS_OK && !*info.host)
        rc = AMQP_STATUS_BAD_URL;
    if (rc != AMQP_STATUS_OK) {
        snprintf (err, errlen,
                  "options.url: expected amqp://[USER@]HOST[:PORT][/VHOST] or "
                  "amqps://..., got \"%s\" (%s)",
                  url, where);
        free (copy);
        return -1;
    }
    out->tls = info.ssl;
    out->port = info.port;
    rc = s_copy (&out->host, info.host, err, errlen)
         || s_copy (&out->vhost, info.vhost, err, errlen)
         || s_copy (&out->user, info.user, err, errlen);
    free (copy);
    return rc;
}

/* options.tls (the table read its keys): the files readable, the key
   not open to others, cert_file and key_file together. */
static int
s_tls (const fanhub_host_t *host, const s_raw_t *raw, bridge_options_t *out, char *err,
       size_t errlen)
{
    out->tls = true;
    out->verify_peer = raw->c.verify_peer;
    out->verify_hostname = host->option_get (raw->c.tls, "verify_hostname") ? raw->c.verify_hostname
                                                                            : raw->c.verify_peer;
    const char *keys[] = {"ca_file", "cert_file", "key_file"};
    const char *files[] = {raw->c.ca_file, raw->c.cert_file, raw->c.key_file};
    char **copies[] = {&out->ca_file, &out->cert_file, &out->key_file};
    for (size_t i = 0; i < 3; i++) {
        if (!files[i])
            continue;
        char name[32];
        snprintf (name, sizeof name, "tls.%s", keys[i]);
        if (s_check_file (host, host->option_get (raw->c.tls, keys[i]), name, files[i], i == 2, err,
                          errlen)
            || s_copy (copies[i], files[i], err, errlen))
            return -1;
    }
    if (!out->cert_file != !out->key_file) {
        snprintf (err, errlen, "options.tls: give cert_file and key_file together (%s)",
                  host->option_where (raw->c.tls));
        return -1;
    }
    return 0;
}

/* options.topic_prefix, as the relay's (the table read from and to). */
static int
s_prefix (const s_raw_t *raw, bridge_options_t *out, char *err, size_t errlen)
{
    if (s_copy (&out->from, raw->from, err, errlen) || s_copy (&out->to, raw->to, err, errlen))
        return -1;
    out->rewrite = true;
    out->from_len = strlen (raw->from);
    out->to_len = strlen (raw->to);
    return 0;
}

void
bridge_options_free (bridge_options_t *o)
{
    if (o->password) {
        memset (o->password, 0, strlen (o->password));
        free (o->password);
    }
    bridge_fedora_free (&o->fedora);
    bridge_declare_free (&o->declare);
    char *strings[] = {o->host,     o->vhost,    o->user, o->ca_file, o->cert_file,
                       o->key_file, o->exchange, o->from, o->to};
    for (size_t i = 0; i < sizeof strings / sizeof *strings; i++)
        free (strings[i]);
    memset (o, 0, sizeof *o);
}

/* The first key of options, in the file's order, that is one of keys
   (NULL-terminated), or NULL. */
static const fanhub_option_t *
s_first_of (const fanhub_host_t *host, const fanhub_option_t *options, const char *const *keys,
            const char **found)
{
    for (size_t i = 0; i < host->option_count (options); i++) {
        const char *key = NULL;
        const fanhub_option_t *node = host->option_at (options, i, &key);
        for (size_t k = 0; key && keys[k]; k++)
            if (strcmp (key, keys[k]) == 0) {
                *found = key;
                return node;
            }
    }
    return NULL;
}

/* What the table cannot say: keys refused or exclusive of each other. */
static int
s_exclusions (const fanhub_host_t *host, const fanhub_option_t *options, char *err, size_t errlen)
{
    const fanhub_option_t *password = host->option_get (options, "password");
    if (password) {
        snprintf (err, errlen,
                  "options.password: a password is never taken from the YAML; "
                  "set password_file (a file of mode 0600) or password_env (%s)",
                  host->option_where (password));
        return -1;
    }
    static const char *const address[] = {"host", "port", "vhost", "user", NULL};
    const char *key = NULL;
    const fanhub_option_t *node = s_first_of (host, options, address, &key);
    if (node && host->option_get (options, "url")) {
        snprintf (err, errlen,
                  "options.%s: give url or host, port, vhost and user, not "
                  "both (%s)",
                  key, host->option_where (node));
        return -1;
    }
    return 0;
}

/* envelope: and declare: with their keys. */
static int
s_take_fedora (const fanhub_host_t *host, const fanhub_option_t *options, const s_raw_t *raw,
               bridge_options_t *out, char *err, size_t errlen)
{
    bridge_fedora_t *f = &out->fedora;
    f->on = raw->c.envelope == 1;
    f->body_msg = raw->body == 1;
    f->severity = (int) raw->severity;
    if (s_copy (&f->schema, raw->schema, err, errlen)
        || bridge_fedora_read (host, options, f, err, errlen))
        return -1;
    bridge_declare_t *d = &out->declare;
    d->on = raw->c.declare;
    d->shards = (size_t) raw->c.shards;
    if (d->on && !raw->c.queue) {
        snprintf (err, errlen, "options.queue: required with declare: true (%s)", out->where);
        return -1;
    }
    if ((raw->c.queue && s_copy (&d->queue, raw->c.queue, err, errlen))
        || s_copy (&d->queue_type, raw->c.queue_type ? "quorum" : "classic", err, errlen)
        || (raw->c.hash_header && s_copy (&d->hash_header, raw->c.hash_header, err, errlen))
        || (raw->c.dead_letter_exchange
            && s_copy (&d->dead_letter_exchange, raw->c.dead_letter_exchange, err, errlen)))
        return -1;
    if (raw->c.hash_exchange && s_copy (&d->hash_exchange, raw->c.hash_exchange, err, errlen))
        return -1;
    return bridge_declare_read (host, raw->c.bindings, d, err, errlen);
}

/* The table's values, copied into out, and the maps and the password read. */
static int
s_take (const fanhub_host_t *host, const fanhub_option_t *options, s_raw_t *raw, bool read_secrets,
        bridge_options_t *out, char *err, size_t errlen)
{
    out->port = (int) raw->port;
    out->confirm_timeout_ns = raw->confirm_timeout_ms * INT64_C (1000000);
    out->connect_timeout_ns = raw->connect_timeout_ms * INT64_C (1000000);
    out->reconnect_max_ns = raw->reconnect_max_ms * INT64_C (1000000);
    out->heartbeat_s = (int) raw->heartbeat_s;
    if (raw->c.url && s_url (host, host->option_get (options, "url"), out, err, errlen))
        return -1;
    if ((!raw->c.url
         && (s_copy (&out->host, raw->host, err, errlen)
             || s_copy (&out->vhost, raw->c.vhost, err, errlen)
             || s_copy (&out->user, raw->c.user, err, errlen)))
        || s_copy (&out->exchange, raw->c.exchange, err, errlen))
        return -1;
    if (raw->c.password) {
        out->password_given = true;
        if (read_secrets) {
            out->password = raw->c.password; /* ours now */
            raw->c.password = NULL;
        }
    }
    if ((raw->c.tls && s_tls (host, raw, out, err, errlen))
        || (raw->topic_prefix && s_prefix (raw, out, err, errlen)))
        return -1;
    out->mandatory = raw->mandatory;
    return s_take_fedora (host, options, raw, out, err, errlen);
}

int
bridge_options_read (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options,
                     bool read_secrets, bridge_options_t *out, char *err, size_t errlen)
{
    memset (out, 0, sizeof *out);
    out->verify_peer = true;
    out->verify_hostname = true;
    snprintf (out->where, sizeof out->where, "%s", host->option_where (options));
    s_raw_t raw = {.port = -1};
    if (s_exclusions (host, options, err, errlen)
        || host->options_load (ctx, options, &raw, sizeof raw, err, errlen))
        goto fail;
    int rc = s_take (host, options, &raw, read_secrets, out, err, errlen);
    if (raw.c.password) { /* check reads it only to see that it can */
        memset (raw.c.password, 0, strlen (raw.c.password));
        free (raw.c.password);
    }
    if (rc != 0)
        goto fail;
    if (out->tls && out->verify_peer && !out->ca_file) {
        snprintf (err, errlen,
                  "options.tls: TLS with verify_peer (the default) needs "
                  "tls.ca_file, the CA certificates that signed the broker's (%s)",
                  out->where);
        goto fail;
    }
    if (out->port < 0)
        out->port = out->tls ? DEFAULT_TLS_PORT : DEFAULT_PORT;
    if (read_secrets && !out->password && s_copy (&out->password, "guest", err, errlen))
        goto fail;
    return 0;
fail:
    bridge_options_free (out);
    return -1;
}
